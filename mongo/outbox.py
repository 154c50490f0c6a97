"""The outbox: every event the spec lists is recorded here as part of the step that made
the state change, and delivered to webhook subscriptions from here.

Without multi-document transactions (and the embedded store's are unsafe), the change
and its event are two single-document writes, event second; callers in actors pass a
deterministic `event_id` so a redelivered actor message records the event once."""

from __future__ import annotations

from pymongo import InsertOne, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError

from pipelines.clock import now_iso
from pipelines.ids import new_uuid


def event_document(workspace_id: str, event: str, data: dict, event_id: str | None = None) -> dict:
    return {
        "_id": event_id or new_uuid(),
        "workspace_id": workspace_id,
        "event": event,
        "data": data,
        "timestamp": now_iso(),
        "dispatched": False,
    }


async def record(db: AsyncDatabase, workspace_id: str, event: str, data: dict,
                 *, event_id: str | None = None) -> str:
    doc = event_document(workspace_id, event, data, event_id)
    try:
        await db.outbox.insert_one(doc)
    except DuplicateKeyError:
        pass
    return doc["_id"]


async def record_many(db: AsyncDatabase, docs: list[dict], *, only_subscribed: bool = False) -> None:
    """Insert events (a redelivered actor's duplicates are ignored by `_id`).

    `only_subscribed` drops events no active subscription of their workspace listens to.
    The send path uses it for the per-message flood (`email.sent`, `email.delivered`):
    a subscription only ever receives events recorded after it was created, so an event
    nobody subscribes to has no reader, and recording it costs two writes a message."""
    if only_subscribed and docs:
        wanted = await subscribed_events(db, [d["workspace_id"] for d in docs])
        docs = [d for d in docs if (d["workspace_id"], d["event"]) in wanted]
    if not docs:
        return
    try:
        await db.outbox.bulk_write([InsertOne(d) for d in docs], ordered=False)
    except BulkWriteError as error:
        if any(e.get("code") != 11000 for e in error.details.get("writeErrors", [])):
            raise


async def subscribed_events(db: AsyncDatabase, workspace_ids: list[str]) -> set[tuple[str, str]]:
    """(workspace id, event type) pairs that at least one active subscription listens to."""
    from . import webhooks
    return {(sub["workspace_id"], event)
            for sub in await webhooks.active_for_workspaces(db, workspace_ids)
            for event in sub.get("events") or []}


async def pending(db: AsyncDatabase, limit: int = 500) -> list[dict]:
    """Events not yet fanned out to webhook deliveries, oldest first."""
    return await db.outbox.find({"dispatched": False}, sort=[("timestamp", 1)], limit=limit).to_list()


async def mark_dispatched(db: AsyncDatabase, event_ids: list[str]) -> None:
    """Guarded per event (`dispatched: false`), by `_id`."""
    if not event_ids:
        return
    at = now_iso()
    await db.outbox.bulk_write([UpdateOne({"_id": e, "dispatched": False},
                                          {"$set": {"dispatched": True, "dispatched_at": at}})
                                for e in event_ids], ordered=False)
