"""A turn of one subscription's webhook lane (the `webhooks` queue's job, actors/webhooks.py),
and the signed POST of one delivery (also the front's test operation).

A lane (one per subscription, mongo/webhooks.py) has at most one job in flight. A turn
posts the lane's due deliveries in volleys: a volley is a bounded number of them leased
under one claim, posted concurrently up to the endpoint's limit over the kept-alive
connections handed in (the HTTP adapter's Session), and recorded in bulk, attempts and
outcomes (while the next volley goes out). A turn fires volleys for up to
TURN_SLICE_SECONDS and, when the lane has more due, hands the lane on to the back of the
queue. So lanes take turns round robin: one workspace's backlog or one slow
endpoint holds one worker slot at a time, and another lane's event waits for at most one
turn of each busy lane. Retries wait in the store (pipelines/webhooks/delivery.py decides
when); the scheduler wakes a lane when its next delivery is due, or when its job was lost
(its lease on the lane ran out: pipelines/workflows/dispatch_webhook_events.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

from pymongo.asynchronous.database import AsyncDatabase

from mongo import webhooks as webhook_store
from pipelines.adapters import http_client as outbound_http
from pipelines.core.concurrency import all_finished
from pipelines.core.documents import WebhookDelivery, WebhookLane, WebhookSubscription
from pipelines.core.secret_box import open_sealed
from pipelines.core.settings import Settings
from pipelines.webhooks import signing as webhook_signing
from pipelines.webhooks.delivery import SECRET_DOES_NOT_OPEN, VOLLEY_WAVES, AttemptOutcome, lease_seconds, outcome_of
from pipelines.workflows.publisher import Publisher

# How long a turn holds the deliveries it took.
TURN_LEASE_SECONDS = lease_seconds(outbound_http.TIMEOUT_SECONDS)
# How long a lane's job is presumed alive, queued or running, before the scheduler gives
# the lane a new one: one turn's lease, and a minute's wait in the queue behind other lanes.
LANE_LEASE_SECONDS = TURN_LEASE_SECONDS + 60
# A turn goes on with the lane's next volley while it has lasted less than this: a fast
# endpoint's backlog is not paid a queue round trip per volley, and a turn still ends soon.
TURN_SLICE_SECONDS = 1.0

# Told the status of each attempt once it is recorded (the worker's metrics).
OnAttempt = Callable[[str], None]


async def take_turn(db: AsyncDatabase, settings: Settings, publisher: Publisher, session: outbound_http.Session,
                    webhook_id: str, token: str, *, on_attempt: OnAttempt | None = None) -> None:
    """One turn of the lane `webhook_id`, for the job holding `token`."""
    lane = await claim_lane(db, webhook_id, token)
    if lane is None:  # a stale job: the lane has a newer one
        return
    more = await deliver_due(db, settings, session, lane, on_attempt)
    await release_or_hand_on(db, publisher, lane, more)


async def claim_lane(db: AsyncDatabase, webhook_id: str, token: str) -> WebhookLane | None:
    """The lane, while `token` (the turn the scheduler gave it) still holds it."""
    lane = await webhook_store.lane(db, webhook_id)
    return lane if lane is not None and lane.get("token") == token else None


async def deliver_due(db: AsyncDatabase, settings: Settings, session: outbound_http.Session, lane: WebhookLane,
                      on_attempt: OnAttempt | None) -> bool:
    """Volleys of the lane's due deliveries, posted and recorded, for up to
    TURN_SLICE_SECONDS. True when the lane may have more due now (its last volley was full)."""
    subscription = await webhook_store.delivery_target(db, lane["workspace_id"], lane["_id"])
    if subscription is None:  # deleted: what still waits in its lane is cancelled
        await webhook_store.cancel_lane(db, lane["_id"])
        return False
    limit = max(1, settings.webhook_endpoint_concurrency) * VOLLEY_WAVES
    started, recording = time.monotonic(), None
    try:
        while True:
            due_count, claim, volley = await take_volley(db, lane["_id"], limit)
            if volley:
                results = await post_volley(volley, subscription, secret_key=settings.secret_key,
                                            allow_private=settings.allow_private_targets,
                                            concurrency=settings.webhook_endpoint_concurrency, session=session)
                outcomes = [outcome_of(d, r, settings.webhook_retry_scale)
                            for d, r in zip(volley, results, strict=True)]
                if recording is not None:
                    await recording
                # recorded while the next volley is taken and posted: the endpoint is not
                # left idle for the writes' round trips
                recording = asyncio.ensure_future(record_outcomes(db, claim, volley, outcomes, on_attempt))
            if due_count < limit:
                return False
            if time.monotonic() - started >= TURN_SLICE_SECONDS:
                return True
    finally:
        if recording is not None:
            await recording


async def take_volley(db: AsyncDatabase, webhook_id: str, limit: int) -> tuple[int, str, list[WebhookDelivery]]:
    """The next volley: up to `limit` of the lane's due deliveries, leased under a new
    claim: (how many were due, the claim, the deliveries it took)."""
    due = await webhook_store.due_in_lane(db, webhook_id, limit)
    claim = uuid.uuid4().hex
    return len(due), claim, await webhook_store.claim(db, webhook_id, due, claim, TURN_LEASE_SECONDS)


async def record_outcomes(db: AsyncDatabase, claim: str, volley: list[WebhookDelivery], outcomes: list[AttemptOutcome],
                          on_attempt: OnAttempt | None) -> None:
    """Every attempt's record, and each delivery's outcome (delivered, failed, or due again
    at its retry time), released from `claim`."""
    changes = [(d["_id"], o.changes) for d, o in zip(volley, outcomes, strict=True)]
    await all_finished(webhook_store.record_attempts(db, [o.attempt for o in outcomes]),
                       webhook_store.finish(db, claim, changes))
    if on_attempt is not None:
        for outcome in outcomes:
            on_attempt(outcome.changes.get("status", "pending"))


async def release_or_hand_on(db: AsyncDatabase, publisher: Publisher, lane: WebhookLane, more: bool) -> None:
    """The turn ends and frees the lane, unless the lane has more due or work was noted
    since the turn began: then it goes to the back of the queue, under the same token."""
    webhook_id, token = lane["_id"], lane["token"]
    if not more and await webhook_store.end_turn(db, webhook_id, token, lane["rev"],
                                                 await webhook_store.next_due_in_lane(db, webhook_id)):
        return
    if await webhook_store.extend_turn(db, webhook_id, token, LANE_LEASE_SECONDS):
        await publisher.webhook_turns([(webhook_id, token)])


def _unsendable(reason: str) -> outbound_http.HttpResult:
    return outbound_http.HttpResult(0, 0, reason)


async def send_signed(*, url: str, sealed_secret: str | None = None, secret: str | None = None,
                      secret_key: str = "", body: str, event: str, delivery_id: str, webhook_id: str,
                      allow_private: bool, session: outbound_http.Session | None = None) -> outbound_http.HttpResult:
    """One signed POST; never raises, so every attempt ends with a result to record.
    `secret`: the opened signing secret (a volley opens it once), else `sealed_secret`."""
    if secret is None:
        try:
            secret = open_sealed(sealed_secret or "", secret_key)
        except ValueError:  # POSTROOM_SECRET_KEY changed since the secret was sealed: not sent unsigned
            return _unsendable(SECRET_DOES_NOT_OPEN)
    raw = body.encode()
    headers = webhook_signing.delivery_headers(secret=secret, body=raw, timestamp=int(time.time()),
                                               event=event, delivery_id=delivery_id,
                                               webhook_id=webhook_id)
    return await outbound_http.post(url, raw, headers, allow_private=allow_private, session=session)


async def post_volley(deliveries: list[WebhookDelivery], subscription: WebhookSubscription, *, secret_key: str,
                      allow_private: bool,
                     concurrency: int, session: outbound_http.Session) -> list[outbound_http.HttpResult]:
    """Each delivery's attempt to `subscription`, at most `concurrency` in flight at once
    (the endpoint's limit), results in the deliveries' order. Never raises."""
    try:
        secret = open_sealed(subscription["secret_sealed"], secret_key)
    except ValueError:
        unsigned = _unsendable(SECRET_DOES_NOT_OPEN)
        return [unsigned for _ in deliveries]
    gate = asyncio.Semaphore(max(1, concurrency))

    async def attempt(delivery: WebhookDelivery) -> outbound_http.HttpResult:
        async with gate:
            return await send_signed(url=subscription["target_url"], secret=secret, body=delivery["body"],
                                     event=delivery["event"], delivery_id=delivery["_id"],
                                     webhook_id=subscription["_id"], allow_private=allow_private, session=session)
    return list(await asyncio.gather(*(attempt(d) for d in deliveries)))
