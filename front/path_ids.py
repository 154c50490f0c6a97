"""Converters for the ids in URL paths, matched by their shape.

`/contacts/<uuid:contact_id>` matches only a UUID, so `/contacts/activity` (and every
other fixed segment beside an id: `/contacts/duplicates`, `/templates/render`,
`/webhooks/triggers`, `/email/send`) belongs to one route alone: OPTIONS and a 405's
`Allow` list that route's methods, not the id route's too. A path id of another shape
answers 404 `not_found` before any view runs, as an unknown id does."""

from __future__ import annotations

from werkzeug.routing import BaseConverter


class UuidConverter(BaseConverter):
    """A resource the spec calls a UUID; given to the view lower-cased, as issued."""
    regex = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    openapi_schema = {"type": "string", "format": "uuid"}

    def to_python(self, value: str) -> str:
        return value.lower()


class MessageIdConverter(BaseConverter):
    """A message id (pipelines.core.ids.new_message_id, and the campaign fan-out's hashed ones)."""
    regex = r"msg_[0-9a-f]{32}"
    openapi_schema = {"type": "string", "pattern": "^msg_[0-9a-f]{32}$"}


CONVERTERS = {"uuid": UuidConverter, "message": MessageIdConverter}


def install(app) -> None:
    app.url_map.converters.update(CONVERTERS)
