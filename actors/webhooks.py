"""The `webhooks` queue: turns of subscriptions' lanes, never one message per delivery.

A lane (one per subscription, mongo/webhooks.py) has at most one job in flight. A turn
leases a bounded batch of the lane's due deliveries, sends them concurrently up to the
endpoint's limit over the worker loop's kept-alive connections, records every attempt and
outcome in bulk (while the next batch goes out), takes batches for up to
TURN_SLICE_SECONDS, and, when the lane has more due, enqueues the lane again at the back
of the queue. So lanes take turns round robin: one workspace's backlog or one slow endpoint
holds one worker slot at a time, and another lane's event waits for at most one turn of
each busy lane. Retries wait in the store; the scheduler wakes a lane when its next
delivery is due, or when its job was lost (its lease on the lane ran out)."""

from __future__ import annotations

import asyncio
import time
import uuid

import dramatiq

from mongo import webhooks as webhook_store
from pipelines.adapters import http_client as outbound_http
from pipelines.webhooks.delivery import TURN_ROUNDS, lease_seconds, outcome_of, send_batch

from . import metrics, runtime

# How long a lane's job is presumed alive, queued or running, before the scheduler gives
# the lane a new one: one turn's lease, and a minute's wait in the queue behind other lanes.
LANE_LEASE_SECONDS = lease_seconds() + 60
# A turn goes on with the lane's next batch while it has lasted less than this: a fast
# endpoint's backlog is not paid a queue round trip per batch, and a turn still ends soon.
TURN_SLICE_SECONDS = 1.0

_sessions: dict[int, tuple[asyncio.AbstractEventLoop, outbound_http.Session]] = {}


def _session() -> outbound_http.Session:
    """The kept-alive connections of this worker's event loop, closed with its resources."""
    loop = asyncio.get_running_loop()
    held = _sessions.get(id(loop))
    if held is None or held[0] is not loop:
        held = _sessions[id(loop)] = (loop, outbound_http.Session())
        runtime.on_close(held[1].aclose)
    return held[1]


# Dramatiq's own retries cover only store or broker errors around a turn; the HTTP retry
# schedule is ours (pipelines/messages/retry_schedule.py) and never raises. A retried turn keeps
# its token, so it still holds its lane.
@dramatiq.actor(queue_name="webhooks", max_retries=5, min_backoff=1000, max_backoff=30_000)
async def take_webhook_turn(webhook_id: str, token: str) -> None:
    db = runtime.store()
    lane = await webhook_store.lane(db, webhook_id)
    if lane is None or lane.get("token") != token:  # a stale job: the lane has a newer one
        return
    more = await _turn(db, lane)
    if more or not await webhook_store.end_turn(db, webhook_id, token, lane["rev"],
                                                await webhook_store.next_due_in_lane(db, webhook_id)):
        # more due, or work noted since the turn began: the lane goes to the back of the queue
        if await webhook_store.extend_turn(db, webhook_id, token, LANE_LEASE_SECONDS):
            await runtime.publisher().webhook_turns([(webhook_id, token)])


async def _turn(db, lane: dict) -> bool:
    """Batches of the lane's due deliveries, attempted and recorded, for up to
    TURN_SLICE_SECONDS. True when the lane may have more due now (its last batch was full)."""
    settings, webhook_id = runtime.settings(), lane["_id"]
    subscription = await webhook_store.get(db, lane["workspace_id"], webhook_id)
    if subscription is None:  # deleted: what still waits in its lane is cancelled
        await webhook_store.cancel_lane(db, webhook_id)
        return False
    limit = max(1, settings.webhook_endpoint_concurrency) * TURN_ROUNDS
    started, recording = time.monotonic(), None
    try:
        while True:
            due = await webhook_store.due_in_lane(db, webhook_id, limit)
            claim = uuid.uuid4().hex
            batch = await webhook_store.claim(db, webhook_id, due, claim, lease_seconds())
            if batch:
                results = await send_batch(batch, subscription, secret_key=settings.secret_key,
                                           allow_private=settings.allow_private_targets,
                                           concurrency=settings.webhook_endpoint_concurrency, session=_session())
                outcomes = [outcome_of(d, r, settings.webhook_retry_scale) for d, r in zip(batch, results)]
                if recording is not None:
                    await recording
                # recorded while the next batch is claimed and sent: the endpoint is not
                # left idle for the writes' round trips
                recording = asyncio.ensure_future(_record(db, claim, batch, outcomes))
            if len(due) < limit:
                return False
            if time.monotonic() - started >= TURN_SLICE_SECONDS:
                return True
    finally:
        if recording is not None:
            await recording


async def _record(db, claim: str, batch: list[dict], outcomes: list) -> None:
    await asyncio.gather(webhook_store.record_attempts(db, [o.attempt for o in outcomes]),
                         webhook_store.finish(db, claim, [(d["_id"], o.changes) for d, o in zip(batch, outcomes)]))
    for outcome in outcomes:
        metrics.count_webhook_attempt(outcome.changes.get("status", "pending"))
