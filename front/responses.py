"""The success shapes: `{data: ...}` and the paginated list."""

from __future__ import annotations


def one(data, status: int = 200):
    return {"data": data}, status


def public(doc: dict, drop: tuple[str, ...] = ("workspace_id",)) -> dict:
    """A stored document as the API shows it: `_id` becomes `id`, internals dropped."""
    out = {"id": doc["_id"]}
    for key, value in doc.items():
        if key != "_id" and key not in drop:
            out[key] = value
    return out
