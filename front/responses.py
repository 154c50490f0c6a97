"""The success shapes: `{data: ...}` and the paginated list."""

from __future__ import annotations

from quart import Response

from mongo import outbox


def one(data, status: int = 200):
    return {"data": data}, status


def public(doc: dict, drop: tuple[str, ...] = ("workspace_id",)) -> dict:
    """A stored document as the API shows it: `_id` becomes `id`, internals dropped
    (`drop`, and always the events a document carries on their way to the outbox)."""
    out = {"id": doc["_id"]}
    for key, value in doc.items():
        if key != "_id" and key not in drop and key not in outbox.CARRIER_FIELDS:
            out[key] = value
    return out


def streamed(chunks, content_type: str, filename: str, status: int = 200):
    """A body sent as it is produced (an async iterator of bytes, or bytes already read), as a download."""
    return Response(chunks, status=status, content_type=content_type,
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})
