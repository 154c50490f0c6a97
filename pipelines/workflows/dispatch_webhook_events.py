"""New outbox events fanned out into deliveries on their subscriptions' lanes, and a turn
given to every lane whose work is due and that has no job in flight (a retry's wait is
over, or a lane's job was lost). Run by the scheduler (ops/webhook_jobs.py); the turns
themselves are pipelines/workflows/deliver_webhooks.py.

Crash-safe in this order: deliveries are inserted (deterministic ids, so a repeat
inserts nothing) and their lanes told, lanes are given turns (enqueued), then the events
are marked dispatched. A crash in between repeats the dispatch next tick; a lane whose
job was lost is found by `wake_due_lanes` once its lease on the lane is over. Duplicate
jobs are harmless: a turn needs the lane's token, and an attempt its delivery's lease.

A tick's share of dispatch is bounded in time (`DISPATCH_TICK_SECONDS`), each pass one
bulk insert and one bulk mark, so a large import's events never keep the scheduler from
its other jobs or its heartbeat."""

from __future__ import annotations

import time

from pymongo.asynchronous.database import AsyncDatabase

from mongo import outbox
from mongo import tags as tag_store
from mongo import webhooks as webhook_store
from pipelines.core.clock import now_iso
from pipelines.webhooks.events import contact_tag_ids, plan_deliveries, with_tag_names
from pipelines.workflows.deliver_webhooks import LANE_LEASE_SECONDS
from pipelines.workflows.publisher import Publisher

# Outbox events one pass of dispatch takes.
EVENTS_PER_PASS = 500
# Dispatch starts no new pass after this long in one tick (the rest waits a tick).
DISPATCH_TICK_SECONDS = 2.0


async def dispatch_outbox(db: AsyncDatabase, publisher: Publisher) -> int:
    """Pending outbox events, EVENTS_PER_PASS at a time for up to DISPATCH_TICK_SECONDS: each becomes
    its deliveries, their lanes get turns, then the events are marked. How many events."""
    done, deadline = 0, time.monotonic() + DISPATCH_TICK_SECONDS
    while time.monotonic() < deadline:
        events = await outbox.pending(db, EVENTS_PER_PASS)
        if not events:
            break
        deliveries = await _insert_deliveries(db, events)
        await give_turns(db, publisher, [d["webhook_id"] for d in deliveries])
        await outbox.mark_dispatched(db, [e["_id"] for e in events])
        done += len(events)
        if len(events) < EVENTS_PER_PASS:
            break
    return done


async def _insert_deliveries(db: AsyncDatabase, events: list[dict]) -> list[dict]:
    """One delivery per event and active subscription that names it, stored on its lane;
    a contact's tags named as the API names them (by the tags' names at dispatch, seconds
    after the event: stored events keep ids, which automations read)."""
    subscriptions = await webhook_store.active_for_workspaces(db, [e["workspace_id"] for e in events])
    names = await tag_store.names(db, None, contact_tag_ids(events))  # tag ids are UUIDs: no workspace mix-up
    now = now_iso()
    deliveries = [d for e in events for d in plan_deliveries(with_tag_names(e, names), subscriptions, now)]
    await webhook_store.insert_deliveries(db, deliveries)
    return deliveries


async def wake_due_lanes(db: AsyncDatabase, publisher: Publisher) -> int:
    """A turn for every idle lane with a delivery due. How many lanes."""
    return await give_turns(db, publisher, await webhook_store.idle_lanes_due(db))


async def give_turns(db: AsyncDatabase, publisher: Publisher, webhook_ids: list[str]) -> int:
    """A turn (a job under a new token) for each of these lanes that has none in flight."""
    turns = await webhook_store.take_turns(db, webhook_ids, LANE_LEASE_SECONDS)
    if turns:
        try:
            await publisher.webhook_turns(turns)
        except Exception:
            # the broker did not take them: free the lanes (a publish that half went out
            # leaves at most a duplicate job, which finds its token gone and stops)
            await webhook_store.release_turns(db, turns)
            raise
    return len(turns)
