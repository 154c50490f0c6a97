"""Idempotency records: one document per (workspace, Idempotency-Key).

The record is claimed with an insert (unique `_id`), so of two concurrent requests with
the same key exactly one executes; the other sees `in_progress`. Expiry is checked here
in code, not left to a TTL index (the embedded store purges TTL lazily, and an expired
key must behave as new at once)."""

from __future__ import annotations

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from pipelines.clock import in_seconds, now_iso

from . import versions


# A claim still `in_progress` after this long belongs to a front that died mid-request
# (no request runs this long: bodies time out after 60 s); a retry may take it over.
IN_PROGRESS_LEASE_SECONDS = 300


def _abandoned(doc: dict) -> bool:
    return doc["state"] == "in_progress" and doc["created_at"] < in_seconds(-IN_PROGRESS_LEASE_SECONDS)


def record_id(workspace_id: str, key: str) -> str:
    return f"{workspace_id}:{key}"


async def claim(db: AsyncDatabase, workspace_id: str, key: str, fingerprint: str,
                ttl_seconds: int) -> tuple[str, dict | None]:
    """Returns ("new", None) when this request owns the key, otherwise ("existing", doc)."""
    _id = record_id(workspace_id, key)
    fresh = {"_id": _id, "fingerprint": fingerprint, "state": "in_progress",
             "response": None, "created_at": now_iso(), "expires_at": in_seconds(ttl_seconds), versions.FIELD: 0}
    try:
        await db.idempotency.insert_one(fresh)
        return "new", None
    except DuplicateKeyError:
        pass
    existing = await db.idempotency.find_one({"_id": _id})
    if existing is None or existing["expires_at"] < now_iso() or _abandoned(existing):
        # Expired or abandoned: take it over, guarded on the version we saw so two takers do
        # not both win (and a claim completed meanwhile is not taken).
        guard = {"_id": _id}
        if existing is not None:
            guard.update(versions.guard(existing))
            fresh[versions.FIELD] = existing.get(versions.FIELD, 0) + 1
        replaced = await db.idempotency.find_one_and_replace(
            guard, fresh, upsert=existing is None, return_document=ReturnDocument.BEFORE)
        if existing is None and replaced is None:
            return "new", None
        if existing is not None and replaced is not None:
            return "new", None
        return "existing", await db.idempotency.find_one({"_id": _id})
    return "existing", existing


async def complete(db: AsyncDatabase, workspace_id: str, key: str, response: dict) -> None:
    await db.idempotency.update_one(
        {"_id": record_id(workspace_id, key)},
        versions.bump({"$set": {"state": "done", "response": response}}))


async def release(db: AsyncDatabase, workspace_id: str, key: str) -> None:
    """Forget a claim whose request failed unexpectedly, so a retry can execute."""
    await db.idempotency.delete_one({"_id": record_id(workspace_id, key), "state": "in_progress"})


async def purge_expired(db: AsyncDatabase) -> int:
    return (await db.idempotency.delete_many({"expires_at": {"$lt": now_iso()}})).deleted_count
