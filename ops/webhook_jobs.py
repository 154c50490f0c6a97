"""Scheduler jobs for webhooks: fan new outbox events out into deliveries, and enqueue
deliveries whose wait in the store is over (or whose broker message was lost).

Crash-safe in this order: deliveries are inserted (deterministic ids, so a repeat
inserts nothing), then enqueued, then the event is marked dispatched. A crash in between
repeats the dispatch next tick; a lost enqueue is caught by `enqueue_due_deliveries`
once the delivery's hand-off grace is over. Duplicate messages are harmless: an attempt
needs the delivery's lease."""

from __future__ import annotations

import asyncio

from pymongo.asynchronous.database import AsyncDatabase

from mongo import outbox
from mongo import webhooks as webhook_store
from pipelines.clock import in_seconds, now_iso
from pipelines.settings import Settings
from pipelines.webhook_events import HANDOFF_GRACE_SECONDS, plan_deliveries

DISPATCH_BATCH = 500
# Passes per tick while the outbox is full, so a burst does not wait a tick per batch.
DISPATCH_PASSES_PER_TICK = 10


async def _enqueue(delivery_ids: list[str]) -> None:
    if not delivery_ids:
        return
    from actors.webhooks import deliver_webhook

    def publish():
        for delivery_id in delivery_ids:
            deliver_webhook.send(delivery_id)
    await asyncio.to_thread(publish)  # pika blocks: keep it off the loop


async def dispatch_outbox(db: AsyncDatabase, settings: Settings) -> int:
    dispatched = 0
    for _ in range(DISPATCH_PASSES_PER_TICK):
        events = await outbox.pending(db, DISPATCH_BATCH)
        if not events:
            break
        subscriptions = await webhook_store.active_for_workspaces(db, [e["workspace_id"] for e in events])
        now, handoff_until = now_iso(), in_seconds(HANDOFF_GRACE_SECONDS)
        deliveries = [d for e in events for d in plan_deliveries(e, subscriptions, now, handoff_until)]
        await webhook_store.insert_deliveries(db, deliveries)
        await _enqueue([d["_id"] for d in deliveries])
        await outbox.mark_dispatched(db, [e["_id"] for e in events])
        dispatched += len(events)
        if len(events) < DISPATCH_BATCH:
            break
    return dispatched


async def enqueue_due_deliveries(db: AsyncDatabase, settings: Settings) -> int:
    until = in_seconds(HANDOFF_GRACE_SECONDS)
    taken = [d["_id"] for d in await webhook_store.due(db)
             if await webhook_store.hand_off(db, d, until)]
    await _enqueue(taken)
    return len(taken)


JOBS = [dispatch_outbox, enqueue_due_deliveries]
