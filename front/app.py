"""The app factory: the front's composition root."""

from __future__ import annotations

import logging

from quart import Quart

from actors import broker as broker_setup
from mongo.client import connect
from pipelines.settings import Settings

from . import auth, errors, openapi, path_ids
from .runtime import FrontRuntime


def create_app(settings: Settings) -> Quart:
    if not settings.mongodb_url:
        raise RuntimeError("create_app needs settings.mongodb_url (ops starts the embedded store)")
    broker_setup.setup(settings)
    broker_setup.load_actors()

    app = Quart("postroom")
    # No routing-level redirects (they answer HTML, not the envelope): `/a//b` and `/a/`
    # are simply other paths, and unknown ones get 404 not_found.
    app.url_map.merge_slashes = False
    app.url_map.strict_slashes = False
    path_ids.install(app)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes
    app.config["BODY_TIMEOUT"] = 60
    app.extensions["postroom"] = FrontRuntime(settings=settings)
    openapi.install(app)
    errors.register(app)
    auth.register(app)

    from .routes import register_all
    register_all(app)

    @app.before_serving
    async def _open_store():
        state: FrontRuntime = app.extensions["postroom"]
        state.client, state.db = connect(settings.mongodb_url, settings.mongodb_database)

    @app.after_serving
    async def _close_store():
        state: FrontRuntime = app.extensions["postroom"]
        if state.client is not None:
            await state.client.close()

    logging.getLogger("postroom").setLevel(logging.INFO)
    return app
