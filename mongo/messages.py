"""Messages (one document per email, `_id` = message id) and their rendered MIME.

History entries are appended with `$addToSet`, not `$push`: each entry carries its own
timestamp so the two are the same on MongoDB, and the embedded store corrupts arrays of
sub-documents on `$push` (see tests/mongo/test_store_behaviour.py)."""

from __future__ import annotations

from pymongo import ReturnDocument, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase

from pipelines import delivery_status
from pipelines.clock import in_seconds, now_iso


async def insert_many(db: AsyncDatabase, docs: list[dict]) -> None:
    if docs:
        await db.messages.insert_many(docs, ordered=True)


async def get(db: AsyncDatabase, workspace_id: str, message_id: str) -> dict | None:
    return await db.messages.find_one({"_id": message_id, "workspace_id": workspace_id})


async def load(db: AsyncDatabase, message_ids: list[str]) -> list[dict]:
    return await db.messages.find({"_id": {"$in": list(message_ids)}}).to_list()


def _transition(message_id: str, new: str, extra: dict | None = None, detail: str | None = None) -> UpdateOne:
    at = now_iso()
    entry = {"status": new, "at": at}
    if detail:
        entry["detail"] = detail
    return UpdateOne(
        {"_id": message_id, "status": {"$in": delivery_status.sources_for(new)}},
        {"$set": {"status": new, "updated_at": at, f"{new}_at": at, **(extra or {})},
         "$addToSet": {"history": entry}})


async def advance(db: AsyncDatabase, changes: list[tuple[str, str, dict | None, str | None]]) -> int:
    """Apply (message_id, new_status, extra fields, detail) transitions that move forward."""
    if not changes:
        return 0
    result = await db.messages.bulk_write([_transition(*c) for c in changes], ordered=False)
    return result.modified_count


async def cancel_scheduled(db: AsyncDatabase, workspace_id: str, message_id: str) -> dict | None:
    at = now_iso()
    return await db.messages.find_one_and_update(
        {"_id": message_id, "workspace_id": workspace_id, "status": "scheduled"},
        {"$set": {"status": "cancelled", "cancelled_at": at, "updated_at": at},
         "$addToSet": {"history": {"status": "cancelled", "at": at}}},
        return_document=ReturnDocument.AFTER)


async def claim_for_sending(db: AsyncDatabase, message_ids: list[str], token: str,
                            lease_seconds: int) -> list[dict]:
    """Guarded claim: a rendered message, or one whose earlier sending lease ran out
    (its worker died mid-send), becomes `sending` under our token. A redelivered
    broker message finds nothing left to claim and sends nothing twice."""
    now = now_iso()
    lease = in_seconds(lease_seconds)
    ops = [UpdateOne(
        {"_id": mid, "$or": [{"status": "rendered"},
                             {"status": "sending", "lease_until": {"$lt": now}}]},
        {"$set": {"status": "sending", "lease_token": token, "lease_until": lease, "updated_at": now}})
        for mid in message_ids]
    await db.messages.bulk_write(ops, ordered=False)
    return await db.messages.find({"_id": {"$in": list(message_ids)}, "lease_token": token,
                                   "status": "sending"}).to_list()


async def store_rendered(db: AsyncDatabase, rendered: list[dict]) -> None:
    """Upsert MIME by message id (re-rendering after a redelivery overwrites, never doubles)."""
    if rendered:
        await db.outgoing.bulk_write(
            [UpdateOne({"_id": r["_id"]}, {"$set": r}, upsert=True) for r in rendered], ordered=False)


async def load_rendered(db: AsyncDatabase, message_ids: list[str]) -> dict[str, dict]:
    docs = await db.outgoing.find({"_id": {"$in": list(message_ids)}}).to_list()
    return {d["_id"]: d for d in docs}


async def drop_rendered(db: AsyncDatabase, message_ids: list[str]) -> None:
    if message_ids:
        await db.outgoing.delete_many({"_id": {"$in": list(message_ids)}})


async def due_scheduled(db: AsyncDatabase, limit: int = 500) -> list[dict]:
    return await db.messages.find(
        {"status": "scheduled", "due_at": {"$lte": now_iso()}},
        {"_id": 1, "workspace_id": 1}, limit=limit, sort=[("due_at", 1)]).to_list()


async def promote(db: AsyncDatabase, message_id: str) -> bool:
    """scheduled → queued, guarded, so two schedulers never both enqueue one message."""
    at = now_iso()
    result = await db.messages.update_one(
        {"_id": message_id, "status": "scheduled"},
        {"$set": {"status": "queued", "queued_at": at, "updated_at": at},
         "$addToSet": {"history": {"status": "queued", "at": at}}})
    return result.modified_count == 1


async def stale_queued(db: AsyncDatabase, older_than_seconds: int, limit: int = 500) -> list[str]:
    """Queued messages whose enqueue may have been lost (a crash between store and broker)."""
    cutoff = in_seconds(-older_than_seconds)
    docs = await db.messages.find({"status": "queued", "queued_at": {"$lt": cutoff}},
                                  {"_id": 1}, limit=limit).to_list()
    return [d["_id"] for d in docs]


async def release_for_retry(db: AsyncDatabase, message_ids: list[str], notes: dict[str, str]) -> None:
    """sending → rendered after a transient failure, keeping the MIME for the next attempt."""
    at = now_iso()
    ops = [UpdateOne({"_id": mid, "status": "sending"},
                     {"$set": {"status": "rendered", "updated_at": at, "last_error": notes.get(mid)},
                      "$inc": {"attempts": 1},
                      "$addToSet": {"history": {"status": "deferred", "at": at, "detail": notes.get(mid)}}})
           for mid in message_ids]
    if ops:
        await db.messages.bulk_write(ops, ordered=False)


async def touch_queued(db: AsyncDatabase, message_ids: list[str]) -> None:
    await db.messages.update_many({"_id": {"$in": message_ids}, "status": "queued"},
                                  {"$set": {"queued_at": now_iso()}})
