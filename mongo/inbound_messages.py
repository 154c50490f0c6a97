"""`inbound_messages`: mail received at a workspace's inbound addresses, one document per
accepted recipient (so a message to two workspaces is two documents, each seen by its own
workspace only), and `inbound_raw`: the raw bytes of each, in chunks of RAW_CHUNK_BYTES
(`_id` = `<message id>:<n>`), so no document nears the store's 16 MB limit and the list
and the actor never carry the raw message.

Times the store filters on are integers (`received_ms`); a page is one aggregate of
equalities and one integer range sorted by that integer, answered from a compound index
(docs/store-notes.md). Status: `received` (stored, its job enqueued) → `processed`
(authenticated, parsed, routed, its event recorded) or `failed` (the scheduler handed it
out MAX_REQUEUES times without success: kept, shown)."""

from __future__ import annotations

import dataclasses

from bson import Binary
from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso, now_ms

from .documents import get_owned, insert_all_new

RAW_CHUNK_BYTES = 1024 * 1024
MAX_REQUEUES = 5

INDEXES: dict[str, list] = {
    "inbound_messages": [
        IndexModel([("workspace_id", ASCENDING), ("received_ms", DESCENDING)], name="ws_received_ms"),
        IndexModel([("workspace_id", ASCENDING), ("route_id", ASCENDING), ("received_ms", DESCENDING)],
                   name="ws_route_received_ms"),
        IndexModel([("workspace_id", ASCENDING), ("recipient_key", ASCENDING), ("received_ms", DESCENDING)],
                   name="ws_recipient_received_ms"),
        IndexModel([("workspace_id", ASCENDING), ("from_key", ASCENDING), ("received_ms", DESCENDING)],
                   name="ws_from_received_ms"),
        IndexModel([("received_ms", ASCENDING)], name="received_ms"),
    ],
}
# What a list item leaves out: the parsed message (GET /inbound/messages/:id has it).
_LIST_PROJECTION = {"parsed": 0}
_ORDER = {"received_ms": -1, "_id": -1}


def raw_chunk_ids(message_id: str, chunks: int) -> list[str]:
    return [f"{message_id}:{n}" for n in range(chunks)]


async def store(db: AsyncDatabase, docs: list[dict], raw: bytes) -> None:
    """The messages (one a recipient) and each one's raw bytes, the bytes first: a message
    is never found without them."""
    pieces = [raw[start:start + RAW_CHUNK_BYTES] for start in range(0, len(raw), RAW_CHUNK_BYTES)] or [b""]
    for doc in docs:
        await insert_all_new(db.inbound_raw, [{"_id": chunk_id, "data": Binary(piece)} for chunk_id, piece
                                              in zip(raw_chunk_ids(doc["_id"], len(pieces)), pieces, strict=True)])
    await insert_all_new(db.inbound_messages, [{**d, "raw_chunks": len(pieces)} for d in docs])


async def load(db: AsyncDatabase, message_id: str) -> dict | None:
    return await db.inbound_messages.find_one({"_id": message_id})


async def get(db: AsyncDatabase, workspace_id: str, message_id: str) -> dict | None:
    return await get_owned(db.inbound_messages, workspace_id, message_id)


async def raw(db: AsyncDatabase, message: dict) -> bytes:
    ids = raw_chunk_ids(message["_id"], int(message.get("raw_chunks") or 0))
    found = {d["_id"]: bytes(d["data"]) for d in await db.inbound_raw.find({"_id": {"$in": ids}}).to_list()}
    return b"".join(found.get(i, b"") for i in ids)


async def finish(db: AsyncDatabase, message_id: str, fields: dict) -> bool:
    """received → processed with what processing found (guarded: once)."""
    result = await db.inbound_messages.update_one(
        {"_id": message_id, "status": "received"},
        {"$set": {**fields, "status": "processed", "processed_at": now_iso()}})
    return result.modified_count == 1


async def stale_received(db: AsyncDatabase, older_than_seconds: int, limit: int = 200) -> tuple[list[str], list[str]]:
    """Messages still `received` this long after arriving (their job was lost or keeps
    failing): (ids to hand out again, counted; ids that have had MAX_REQUEUES and are now
    `failed`)."""
    docs = await db.inbound_messages.find(
        {"received_ms": {"$lt": now_ms() - older_than_seconds * 1000}, "status": "received"},
        {"requeues": 1}, sort=[("received_ms", ASCENDING)], limit=limit).to_list()
    again = [d["_id"] for d in docs if int(d.get("requeues") or 0) < MAX_REQUEUES]
    spent = [d["_id"] for d in docs if int(d.get("requeues") or 0) >= MAX_REQUEUES]
    if again:
        await db.inbound_messages.update_many({"_id": {"$in": again}, "status": "received"},
                                              {"$inc": {"requeues": 1}})
    if spent:
        await db.inbound_messages.update_many({"_id": {"$in": spent}, "status": "received"},
                                              {"$set": {"status": "failed", "processed_at": now_iso()}})
    return again, spent


async def delete_received_before(db: AsyncDatabase, before_ms: int, limit: int) -> int:
    """Up to `limit` messages received before `before_ms`, with their raw bytes, deleted
    (oldest first, found by the `received_ms` index, deleted by `_id`). How many."""
    docs = await db.inbound_messages.find({"received_ms": {"$lt": before_ms}}, {"raw_chunks": 1},
                                          sort=[("received_ms", ASCENDING)], limit=limit).to_list()
    if not docs:
        return 0
    chunk_ids = [c for d in docs for c in raw_chunk_ids(d["_id"], int(d.get("raw_chunks") or 0))]
    await db.inbound_raw.delete_many({"_id": {"$in": chunk_ids}})
    result = await db.inbound_messages.delete_many({"_id": {"$in": [d["_id"] for d in docs]}})
    return result.deleted_count


@dataclasses.dataclass(frozen=True)
class Filters:
    """A GET /inbound/messages query: equalities and [since_ms, until_ms)."""
    route_id: str | None = None
    recipient: str | None = None
    sender: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def match(self, workspace_id: str) -> dict:
        where: dict = {"workspace_id": workspace_id}
        for field, value in (("route_id", self.route_id), ("recipient_key", self.recipient),
                             ("from_key", self.sender)):
            if value is not None:
                where[field] = value.lower() if field != "route_id" else value
        return where

    def window(self, upper: int | None = None) -> dict:
        until = self.until_ms if upper is None else (upper if self.until_ms is None else min(upper, self.until_ms))
        return {"received_ms": {"$gte": self.since_ms or 0, **({"$lt": until} if until is not None else {})}}


async def _aggregate(db: AsyncDatabase, match: dict, skip: int, limit: int) -> list[dict]:
    pipeline: list[dict] = [{"$match": match}, {"$sort": _ORDER}]
    if skip:
        pipeline.append({"$skip": skip})
    pipeline += [{"$limit": limit}, {"$project": _LIST_PROJECTION}]
    return await (await db.inbound_messages.aggregate(pipeline)).to_list()


async def page(db: AsyncDatabase, workspace_id: str, filters: Filters, *, limit: int, offset: int,
               after: tuple[int, str] | None) -> tuple[list[dict], int]:
    """Newest first: a page from `offset`, or after the cursor `after` (the last shown's
    `received_ms`, `_id`: its millisecond's ties first, then the older ones); and how
    many match in all."""
    base = filters.match(workspace_id)
    if after is None:
        items = await _aggregate(db, {**base, **filters.window()}, offset, limit)
    else:
        items = await _aggregate(db, {**base, "received_ms": after[0], "_id": {"$lt": after[1]}}, 0, limit)
        if len(items) < limit:
            items += await _aggregate(db, {**base, **filters.window(after[0])}, 0, limit - len(items))
    counted = await (await db.inbound_messages.aggregate(
        [{"$match": {**base, **filters.window()}}, {"$count": "n"}])).to_list()
    return items, int(counted[0]["n"]) if counted else 0
