"""Engagement records: opens and clicks counted on the message (by `_id`), contact events
(`contact_events`: page_viewed, purchase, … — what automations wait on), conversions.

Opens, clicks and unsubscribes are counted with `$inc` in a `find_one_and_update` that
returns the document as it was, so exactly one request sees the count go from 0 to 1:
that one is the unique open (click, unsubscribe), however many arrive at once."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso
from pipelines.core.ids import new_uuid

from . import campaigns, outbox

INDEXES: dict[str, list] = {
    "contact_events": [IndexModel([("workspace_id", ASCENDING), ("contact_id", ASCENDING),
                                   ("type", ASCENDING), ("at", ASCENDING)], name="ws_contact_type_at")],
    "conversions": [IndexModel([("workspace_id", ASCENDING), ("created_at", DESCENDING)], name="ws_created")],
}

_COUNT_FIELDS = {"open": "open_count", "click": "click_count", "unsubscribe": "unsubscribe_count",
                 "complaint": "complaint_count"}


async def count_engagement(db: AsyncDatabase, workspace_id: str, message_id: str,
                           kind: str) -> tuple[dict | None, bool]:
    """Count one open/click/unsubscribe on a message. Returns (the message as it was
    before, whether this was its first of that kind); (None, False) for an unknown message."""
    field = _COUNT_FIELDS[kind]
    at = now_iso()
    before = await db.messages.find_one_and_update(
        {"_id": message_id, "workspace_id": workspace_id},
        {"$inc": {field: 1}, "$set": {f"last_{kind}_at": at}},
        projection={"history": 0}, return_document=ReturnDocument.BEFORE)
    if before is None:
        return None, False
    return before, int(before.get(field) or 0) == 0


async def add_contact_event(db: AsyncDatabase, workspace_id: str, contact_id: str, event_type: str,
                            data: dict, *, event_id: str | None = None) -> dict:
    doc = {"_id": event_id or new_uuid(), "workspace_id": workspace_id, "contact_id": contact_id,
           "type": event_type, "data": data, "at": now_iso()}
    await db.contact_events.insert_one(doc)
    return doc


async def contact_events(db: AsyncDatabase, workspace_id: str, contact_id: str,
                         event_type: str | None = None, since: str | None = None) -> list[dict]:
    query: dict = {"workspace_id": workspace_id, "contact_id": contact_id}
    if event_type:
        query["type"] = event_type
    if since:
        query["at"] = {"$gte": since}
    return await db.contact_events.find(query, sort=[("at", 1)]).to_list()


async def insert_conversion(db: AsyncDatabase, doc: dict, event: dict) -> dict:
    """Store a conversion carrying its conversion.created `event` in the same write."""
    await db.conversions.insert_one(outbox.inserted_with(doc, [event]))
    await outbox.relay(db, "conversions", [doc["_id"]], {event["_id"]})
    return doc


async def conversions_page(db: AsyncDatabase, workspace_id: str, limit: int, offset: int) -> tuple[list[dict], int]:
    query = {"workspace_id": workspace_id}
    items = await db.conversions.find(query, sort=[("created_at", -1), ("_id", 1)],
                                      skip=offset, limit=limit).to_list()
    return items, await db.conversions.count_documents(query)


async def _count_once_on_campaign(db: AsyncDatabase, workspace_id: str, message_id: str | None,
                                  kind: str, counter: str) -> None:
    if not message_id:
        return
    before, first = await count_engagement(db, workspace_id, message_id, kind)
    if before is not None and first and before.get("campaign_id"):
        await campaigns.bump(db, before["campaign_id"], **{counter: 1})


async def record_unsubscribe(db: AsyncDatabase, workspace_id: str, message_id: str | None) -> None:
    """Count an unsubscribe on the campaign the message came from (once per message)."""
    await _count_once_on_campaign(db, workspace_id, message_id, "unsubscribe", "unsubscribed")


async def record_complaint(db: AsyncDatabase, workspace_id: str, message_id: str | None) -> None:
    """Count a spam complaint (ARF) on the campaign the message came from (once per message,
    so a report applied twice counts once)."""
    await _count_once_on_campaign(db, workspace_id, message_id, "complaint", "complained")
