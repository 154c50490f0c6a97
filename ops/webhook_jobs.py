"""Scheduler jobs for webhooks: fan new outbox events out into deliveries, and enqueue
deliveries whose wait in the store is over (or whose broker message was lost).

Crash-safe in this order: deliveries are inserted (deterministic ids, so a repeat
inserts nothing), then enqueued, then the event is marked dispatched. A crash in between
repeats the dispatch next tick; a lost enqueue is caught by `enqueue_due_deliveries`
once the delivery's hand-off grace is over. Duplicate messages are harmless: an attempt
needs the delivery's lease."""

from __future__ import annotations


from actors.runtime import publisher
from pymongo.asynchronous.database import AsyncDatabase

from mongo import outbox
from mongo import webhooks as webhook_store
from pipelines.clock import in_seconds, now_iso
from pipelines.settings import Settings
from pipelines.webhook_events import HANDOFF_GRACE_SECONDS, plan_deliveries

from .job_passes import drain

DISPATCH_BATCH = 500
# Passes per tick while the outbox is full, so a burst does not wait a tick per batch.
DISPATCH_PASSES_PER_TICK = 10


async def _enqueue(delivery_ids: list[str]) -> None:
    if not delivery_ids:
        return
    await publisher().deliver_webhooks(delivery_ids)


async def dispatch_outbox(db: AsyncDatabase, settings: Settings) -> int:
    async def dispatch(events: list[dict]) -> None:
        subscriptions = await webhook_store.active_for_workspaces(db, [e["workspace_id"] for e in events])
        now, handoff_until = now_iso(), in_seconds(HANDOFF_GRACE_SECONDS)
        deliveries = [d for e in events for d in plan_deliveries(e, subscriptions, now, handoff_until)]
        await webhook_store.insert_deliveries(db, deliveries)
        await _enqueue([d["_id"] for d in deliveries])
        await outbox.mark_dispatched(db, [e["_id"] for e in events])
    return await drain(lambda limit: outbox.pending(db, limit), dispatch,
                       batch=DISPATCH_BATCH, passes=DISPATCH_PASSES_PER_TICK)


async def enqueue_due_deliveries(db: AsyncDatabase, settings: Settings) -> int:
    until = in_seconds(HANDOFF_GRACE_SECONDS)
    taken = [d["_id"] for d in await webhook_store.due(db)
             if await webhook_store.hand_off(db, d, until)]
    await _enqueue(taken)
    return len(taken)

