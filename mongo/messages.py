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


_MIME_DONE = {"delivered", *delivery_status.FINAL}


def _transition(message_id: str, new: str, extra: dict | None = None, detail: str | None = None,
                via: tuple[str, ...] = ()) -> UpdateOne:
    """A guarded move to `new`; `via` names steps passed on the way (e.g. `sent` on the
    way to `delivered`), each recorded with the same timestamp, in one write."""
    at = now_iso()
    entries = [{"status": step, "at": at} for step in via]
    entry = {"status": new, "at": at}
    if detail:
        entry["detail"] = detail
    entries.append(entry)
    stamps = {f"{step}_at": at for step in (*via, new)}
    if new in _MIME_DONE:  # the rendered MIME is not needed once the receiver answered
        stamps["mime"] = ""
    return UpdateOne(
        {"_id": message_id, "status": {"$in": delivery_status.sources_for(new)}},
        {"$set": {"status": new, "updated_at": at, **stamps, **(extra or {})},
         "$addToSet": {"history": {"$each": entries}}})


async def advance(db: AsyncDatabase, changes: list[tuple]) -> int:
    """Apply (message_id, new_status, extra fields, detail[, via]) transitions that move forward."""
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
    broker message finds nothing left to claim and sends nothing twice. The claimed
    documents carry their rendered MIME (`mime`)."""
    now = now_iso()
    claim = {"$set": {"status": "sending", "lease_token": token,
                      "lease_until": in_seconds(lease_seconds), "updated_at": now}}
    # Two flat filters rather than one `$or`: beside `_id`, an `$or` makes the embedded
    # store scan the collection for every update (4.4 ms a message at 1,000 messages,
    # against 0.2 ms flat), and MongoDB is as happy with either.
    fresh = await db.messages.bulk_write(
        [UpdateOne({"_id": mid, "status": "rendered"}, claim) for mid in message_ids], ordered=False)
    if fresh.modified_count < len(message_ids):
        await db.messages.bulk_write(
            [UpdateOne({"_id": mid, "status": "sending", "lease_until": {"$lt": now}}, claim)
             for mid in message_ids], ordered=False)
    return await db.messages.find({"_id": {"$in": list(message_ids)}, "lease_token": token,
                                   "status": "sending"}, {"html": 0, "text": 0}).to_list()


async def save_rendered(db: AsyncDatabase, rendered: list[dict], failed: dict[str, str]) -> None:
    """queued → rendered with the MIME on the message itself (one write per message, and
    the send step's claim reads it back), or queued → failed with the reason."""
    changes = [(r["_id"], "rendered", {"mime": {k: v for k, v in r.items() if k != "_id"}}, None)
               for r in rendered]
    changes += [(mid, "failed", {"error": why}, why) for mid, why in failed.items()]
    await advance(db, changes)


async def store_rendered(db: AsyncDatabase, rendered: list[dict]) -> None:
    """Kept for callers that render then advance separately: put the MIME on the message."""
    await save_rendered(db, rendered, {})


async def due_scheduled(db: AsyncDatabase, limit: int = 500) -> list[dict]:
    now = now_iso()
    docs = await db.messages.find(
        {"status": "scheduled", "due_at": {"$lte": now}},
        {"_id": 1, "workspace_id": 1, "due_at": 1}, limit=limit, sort=[("due_at", 1)]).to_list()
    # Checked again here: the embedded store compares these strings at whole seconds.
    return [d for d in docs if d["due_at"] <= now]


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


async def release_for_retry(db: AsyncDatabase, message_ids: list[str], notes: dict[str, str],
                            *, count_attempt: bool = True) -> None:
    """sending → rendered after a transient failure (or a throttle hold, which does not
    count as an attempt), keeping the MIME for the next try."""
    at = now_iso()
    ops = []
    for mid in message_ids:
        update = {"$set": {"status": "rendered", "updated_at": at, "lease_token": ""}}
        if count_attempt:
            update["$set"]["last_error"] = notes.get(mid)
            update["$inc"] = {"attempts": 1}
            update["$addToSet"] = {"history": {"status": "deferred", "at": at, "detail": notes.get(mid)}}
        ops.append(UpdateOne({"_id": mid, "status": "sending"}, update))
    if ops:
        await db.messages.bulk_write(ops, ordered=False)


async def touch_queued(db: AsyncDatabase, message_ids: list[str]) -> None:
    await db.messages.update_many({"_id": {"$in": message_ids}, "status": "queued"},
                                  {"$set": {"queued_at": now_iso()}})
