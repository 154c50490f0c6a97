"""Idempotency records: one document per (workspace, Idempotency-Key).

The record is claimed with an insert (unique `_id`), so of two concurrent requests with
the same key exactly one executes; the other sees `in_progress`. Expiry is checked here
in code, not left to a TTL index (the embedded store purges TTL lazily, and an expired
key must behave as new at once)."""

from __future__ import annotations

import uuid

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from pipelines.core.clock import in_seconds, ms_in, now_iso, now_ms

from . import versions

# A claim still `in_progress` after this long belongs to a front that died mid-request
# (no request runs this long: bodies time out after 60 s); a retry may take it over.
IN_PROGRESS_LEASE_SECONDS = 300


def _abandoned(doc: dict) -> bool:
    return doc["state"] == "in_progress" and doc["created_at"] < in_seconds(-IN_PROGRESS_LEASE_SECONDS)


def _outcome_unknown(doc: dict) -> bool:
    """Released by a request that could not tell whether its write landed, or abandoned by
    a front that died mid-request."""
    return doc["state"] == "released" or _abandoned(doc)


def record_id(workspace_id: str, key: str) -> str:
    return f"{workspace_id}:{key}"


async def claim(db: AsyncDatabase, workspace_id: str, key: str, fingerprint: str,
                ttl_seconds: int) -> tuple[str, dict | None]:
    """("new", record) when this request owns the key now, otherwise ("existing", record)
    (None when the record was released or purged between the two reads).

    The record's `seed` names what the request creates (front/idempotency.py). A new key
    gets a fresh seed; a request taking over a key whose earlier attempt's outcome is
    unknown keeps that attempt's seed (same body only), so it builds the same ids and finds,
    instead of duplicating, what the attempt stored. Each claim has its own `claim` token,
    which guards the takeover and the release."""
    _id = record_id(workspace_id, key)
    fresh = {"_id": _id, "fingerprint": fingerprint, "state": "in_progress", "response": None,
             "claim": uuid.uuid4().hex, "seed": uuid.uuid4().hex,
             "created_at": now_iso(), "expires_at": in_seconds(ttl_seconds), "expires_ms": ms_in(ttl_seconds)}
    try:
        await db.idempotency.insert_one(fresh)
        return "new", fresh
    except DuplicateKeyError:
        pass
    existing = await db.idempotency.find_one({"_id": _id})
    if existing is None:  # released or purged in between: claim it afresh
        try:
            await db.idempotency.insert_one(fresh)
            return "new", fresh
        except DuplicateKeyError:
            return "existing", await db.idempotency.find_one({"_id": _id})
    expired = existing["expires_at"] < now_iso()
    if not expired and not _outcome_unknown(existing):
        return "existing", existing
    if not expired and existing["fingerprint"] == fingerprint and existing.get("seed"):
        fresh["seed"] = existing["seed"]
    # Take it over, guarded on the claim we saw, so of two takers one wins.
    taken = await db.idempotency.replace_one({"_id": _id, "claim": existing.get("claim")}, fresh)
    if taken.matched_count == 1:
        return "new", fresh
    return "existing", await db.idempotency.find_one({"_id": _id})


async def complete(db: AsyncDatabase, workspace_id: str, key: str, response: dict) -> None:
    await db.idempotency.update_one(
        {"_id": record_id(workspace_id, key)},
        versions.bump({"$set": {"state": "done", "response": response}}))


async def release(db: AsyncDatabase, workspace_id: str, key: str, claim: str, *,
                  keep_seed: bool = False) -> None:
    """Let a retry execute after this claim's request failed. `keep_seed`: the failure left
    its outcome unknown (a write may have landed), so the retry must build the same ids."""
    guard = {"_id": record_id(workspace_id, key), "claim": claim, "state": "in_progress"}
    if keep_seed:
        await db.idempotency.update_one(guard, {"$set": {"state": "released"}})
    else:
        await db.idempotency.delete_one(guard)


async def purge_expired(db: AsyncDatabase) -> int:
    # on the integer twin: a date-like string in the filter makes the embedded store read every record
    return (await db.idempotency.delete_many({"expires_ms": {"$lt": now_ms()}})).deleted_count
