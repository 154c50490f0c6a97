"""The app factory: the front's composition root."""

from __future__ import annotations

import logging
import time

from quart import Quart, request
from werkzeug.exceptions import RequestEntityTooLarge

from actors import broker as broker_setup
from mongo import processes
from mongo.client import connect
from pipelines.core.settings import Settings

from . import access_log, auth, errors, metrics, openapi, path_ids
from .openapi import KeptDocumentsFirst
from .routes import register_all
from .runtime import FrontRuntime

# A store that accepted the connection but stopped answering holds a request at most this
# long (then 503); generous, since some reads legitimately scan (counts on the embedded store).
STORE_ANSWER_WITHIN_SECONDS = 30.0


def _refuse_declared_oversize(app: Quart, max_bytes: int) -> None:
    """A body declared larger than allowed is answered 413 at once, before authentication
    and before a byte of it is read (Quart alone would read on until the view asks). A
    body that grows past the limit without declaring it is cut off while it is read."""
    @app.before_request
    async def _declared_oversize():
        if (request.content_length or 0) > max_bytes:
            raise RequestEntityTooLarge()


def create_app(settings: Settings) -> Quart:
    if not settings.mongodb_url:
        raise RuntimeError("create_app needs settings.mongodb_url (ops starts the embedded store)")
    broker_setup.setup(settings)

    app = Quart("postroom")
    # No routing-level redirects (they answer HTML, not the envelope): `/a//b` and `/a/`
    # are simply other paths, and unknown ones get 404 not_found.
    app.url_map.merge_slashes = False
    app.url_map.strict_slashes = False
    path_ids.install(app)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes
    app.config["BODY_TIMEOUT"] = settings.request_body_timeout_seconds
    app.extensions["postroom"] = FrontRuntime(settings=settings)
    openapi.install(app)
    metrics.install(app)  # first: its before_request runs before auth can answer
    access_log.install(app)  # so does this one: a refused request is logged and timed too
    _refuse_declared_oversize(app, settings.max_request_bytes)
    errors.register(app)
    auth.register(app)

    register_all(app)

    @app.before_serving
    async def _open_store():
        state: FrontRuntime = app.extensions["postroom"]
        # Requests do not hang on an unreachable store: they answer 503 after a short wait.
        state.client, state.db = connect(settings.mongodb_url, settings.mongodb_database,
                                         wait_seconds=settings.front_store_wait_seconds,
                                         answer_within_seconds=STORE_ANSWER_WITHIN_SECONDS)
        # Quart sets shutdown_event before it waits for background tasks, then closes the store
        app.add_background_task(processes.beat_until, state.db, "front", app.shutdown_event)

    @app.after_serving
    async def _close_store():
        state: FrontRuntime = app.extensions["postroom"]
        state.body_parsers.close()
        if state.client is not None:
            await state.client.close()

    logging.getLogger("postroom").setLevel(logging.INFO)
    return app


def asgi(app: Quart) -> KeptDocumentsFirst:
    """What the server runs: the app, with the kept OpenAPI documents answered in front of it."""
    def on_answer(method: str, path: str, status: int, started: float, headers: dict) -> dict:
        metrics.observe(path, method, status, started)
        answered_as = access_log.request_id(headers.get(access_log.REQUEST_ID_HEADER.lower(), ""))
        access_log.write(method, path, status, round((time.perf_counter() - started) * 1000, 1), None, answered_as)
        return {access_log.REQUEST_ID_HEADER: answered_as}
    return KeptDocumentsFirst(app, app.extensions["postroom_document"], on_answer)
