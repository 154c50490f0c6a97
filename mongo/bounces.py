"""Bounce and complaint records (`bounces`), one per report and recipient, `_id` derived
from the report (pipelines.bounces.effects.bounce_id) so a redelivered report writes
nothing new. Each carries `created_ms`, its `created_at` as integer epoch milliseconds:
what a time window ranges over, since a date-like string in a filter makes the embedded
store read every bounce under its one lock (docs/store-notes.md). The records are built
by pipelines.bounces.effects.bounce_document."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import ms_of
from pipelines.core.documents import BounceRecord

from .documents import insert_new

INDEXES: dict[str, list] = {
    "bounces": [
        IndexModel([("workspace_id", ASCENDING), ("created_at", DESCENDING)], name="ws_created"),
        IndexModel([("workspace_id", ASCENDING), ("email_key", ASCENDING), ("created_at", DESCENDING)],
                   name="ws_email_created"),
        # a single integer field: the only kind of range the embedded store answers from an index
        IndexModel([("created_ms", ASCENDING)], name="created_ms"),
        # a message's reports (GET /email/:id's timeline)
        IndexModel([("message_id", ASCENDING)], name="message"),
    ],
}

async def insert(db: AsyncDatabase, doc: BounceRecord) -> bool:
    """False when this bounce is already recorded. `created_ms` is derived from `created_at`
    here again, whoever built the record: a window must find what the date shown says."""
    return await insert_new(db.bounces, {**doc, "created_ms": ms_of(doc["created_at"])})


async def count_recent(db: AsyncDatabase, workspace_id: str, email: str, *, type_: str, categories: tuple[str, ...],
                       since: str) -> int:
    """Bounces of the address of this type and one of these categories since `since`.
    A find over the address's own bounces (index ws_email_created), the rest checked here:
    a count, or a date-like string in the filter, makes the embedded store read every bounce."""
    found = await db.bounces.find({"workspace_id": workspace_id, "email_key": email.lower()},
                                  {"kind": 1, "type": 1, "category": 1, "created_at": 1}).to_list()
    return sum(1 for b in found if b.get("kind") == "bounce" and b.get("type") == type_
               and b.get("category") in categories and b.get("created_at", "") >= since)


async def get(db: AsyncDatabase, workspace_id: str, bounce_id: str) -> BounceRecord | None:
    return await db.bounces.find_one({"_id": bounce_id, "workspace_id": workspace_id})


async def list_page(db: AsyncDatabase, workspace_id: str, *, type_: str | None, kind: str | None, email: str | None,
                    since: str | None, until: str | None, limit: int, offset: int) -> tuple[list[BounceRecord], int]:
    query: dict = {"workspace_id": workspace_id}
    if type_:
        query["type"] = type_
    if kind:
        query["kind"] = kind
    if email:
        query["email_key"] = email.lower()
    # at millisecond precision: `since`/`until` as integers, never as date strings
    window = {**({"$gte": ms_of(since)} if since else {}), **({"$lt": ms_of(until)} if until else {})}
    if window:
        query["created_ms"] = window
    # `$count`, not count_documents: the embedded store answers a `$match` and `$count` from
    # its index, where count_documents' `$group` reads every bounce (mongo/campaign_audience.py)
    # and the window as an `$and` of its own for the count only: the embedded store counts a
    # plain {workspace_id, created_ms} by reading every bounce of the workspace (61 ms at
    # 30,000, 144 ms at 100,000), the `$and` from the created_ms index (2.6 ms); the find
    # is the other way round (583 ms as an `$and`), so it keeps the plain filter
    counting = {"$and": [{"created_ms": window}, {k: v for k, v in query.items() if k != "created_ms"}]} \
        if window else query
    counted = await (await db.bounces.aggregate([{"$match": counting}, {"$count": "n"}])).to_list()
    total = int(counted[0]["n"]) if counted else 0
    docs = await db.bounces.find(query, sort=[("created_at", -1), ("_id", 1)], skip=offset,
                                 limit=limit).to_list()
    return docs, total


async def of_message(db: AsyncDatabase, workspace_id: str, message_id: str) -> list[dict]:
    """The bounce and complaint records of one message, oldest first (an aggregate: the
    embedded store answers its `$match` from the `message` index, a `find` by a field
    other than `_id` reads every bounce)."""
    cursor = await db.bounces.aggregate([{"$match": {"message_id": message_id, "workspace_id": workspace_id}},
                                         {"$sort": {"created_ms": 1}}])
    return await cursor.to_list()
