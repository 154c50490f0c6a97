"""The `send` queue: rendered MIME → SMTP, many messages in flight per worker, under
limits shared by every worker process (pipelines/throttle.py over mongo/send_limits.py).

One job is a chunk of rendered messages, `{"_id", "mail_from", "recipients", "data"}`
each (`data`: the ASCII MIME), as the `render` actor made them. The MIME travels in the
job, not in the store: the store stays the one record of each message's state, and the
MIME is a derived artefact that can always be made again from the message (a lost job
costs a render, never a message: the scheduler's watchdog, ops/message_watchdog.py,
enqueues the render again of what stays `queued`, or `sending` past its lease). Keeping
it out of the store saves writing 5–20 KB per message and reading it back.

A job claims its messages (`queued` → `sending`, guarded, so a redelivered or duplicated
job sends nothing twice), admits what the limits allow, sends the admitted ones
concurrently over the pooled connections, and applies the outcomes in bulk. Held and
transiently failed messages go back to `queued` and their MIME rides the broker's delay
queue in a new job (≤ 60 s) — never dropped, never waited for in a loop. A worker killed
mid-send leaves its messages `sending`; once their lease runs out, the redelivered job
(or the watchdog's render) claims and sends them again, so only what was in flight can
arrive twice."""

from __future__ import annotations

import asyncio
import time
import uuid

import dramatiq

from mongo import analytics, batches, campaigns, messages, outbox, send_limits
from pipelines.outcomes import OutcomePlan, plan_outcomes
from pipelines.recipients import owed_recipients
from pipelines.settings import SEND_LEASE_MARGIN_SECONDS
from pipelines.throttle import DomainLimit, SendThrottle

from . import bounces as bounce_actor
from . import metrics, runtime
from .publish import publish


@dramatiq.actor(queue_name="send", max_retries=10, min_backoff=1000, max_backoff=60_000)
async def send_messages(rendered: list[dict], attempt: int = 0) -> None:
    db, s = runtime.store(), runtime.settings()
    mime = {r["_id"]: r for r in rendered}
    token = uuid.uuid4().hex
    claimed_at = time.monotonic()
    claimed = await messages.claim_for_sending(db, list(mime), token, s.send_lease_seconds)
    claimed = await campaigns.withhold_cancelled(db, claimed)  # a cancelled campaign sends no more
    if not claimed:
        return
    throttle = SendThrottle(send_limits.StoreLimiterBackend(db))
    admission = await throttle.admit(claimed, await _limits(db, claimed))
    await _requeue(db, [m["_id"] for m in admission.held], mime, token, admission.retry_after_seconds * 1000)
    # Past its lease a claim may be given to another worker (the watchdog): start no SMTP
    # transaction that could outlast it, so only a dead worker's in-flight mail goes twice.
    start_by = claimed_at + s.send_lease_seconds - s.smtp_timeout_seconds - SEND_LEASE_MARGIN_SECONDS
    try:
        results = await asyncio.gather(*(_deliver(m, mime.get(m["_id"]), start_by) for m in admission.admitted))
    finally:
        await throttle.release(admission)
    late = [m["_id"] for m, outcomes in results if outcomes is NOT_STARTED]
    await _requeue(db, late, mime, token, 0)
    plan = plan_outcomes([r for r in results if r[1] is not NOT_STARTED])
    await _apply(db, plan, mime, token)
    metrics.count_send_outcomes(plan.finished, [m for m in claimed if m["_id"] in set(plan.retry_ids)],
                                len(admission.held))


async def _limits(db, claimed: list[dict]):
    s = runtime.settings()
    return await send_limits.load_limits(
        db, claimed, default_key_rate_per_minute=s.email_rate_limit_per_minute,
        default_domain=DomainLimit(s.domain_rate_per_minute, s.domain_concurrency))


async def _requeue(db, message_ids: list[str], mime: dict[str, dict], token: str, delay_ms: float) -> None:
    """Claimed but not tried (held by a throttle, or too late in the lease to start): back
    to `queued` without counting an attempt, the MIME in a new job after `delay_ms`."""
    if not message_ids:
        return
    await messages.release_for_retry(db, message_ids, token, {}, count_attempt=False)
    await publish(send_messages, [mime[mid] for mid in message_ids], delay=int(delay_ms))


NOT_STARTED = object()  # _deliver's outcome for a transaction not started in time


async def _deliver(message: dict, rendered: dict | None, start_by: float):
    if not rendered:
        return message, None
    # the claimed message says who is still owed (a retry after a partial delivery)
    still_owed = set(owed_recipients(message))
    owed = [r for r in rendered["recipients"] if r in still_owed]
    if not owed:  # every recipient settled already: nothing to send, the outcome decides
        return message, {}
    with metrics.SMTP_SECONDS.time():
        outcomes = await runtime.transport().send(rendered["mail_from"], owed, rendered["data"].encode("ascii"),
                                                  message["_id"], start_by=start_by)
    return message, NOT_STARTED if outcomes is None else outcomes


async def _apply(db, plan: OutcomePlan, mime: dict[str, dict], token: str) -> None:
    """Outcomes in bulk: status changes, events, synchronous bounces, batch and analytics
    counts; then the transient failures go back for a later attempt, MIME and all."""
    await messages.advance(db, plan.transitions, expected="sending")
    await outbox.record_many(db, plan.events, only_subscribed=True)
    await batches.record_finished(db, plan.finished)
    await analytics.bump_many(db, plan.analytics)
    await bounce_actor.record_rejections(db, plan.bounces)
    if plan.retry_ids:
        await messages.release_for_retry(db, plan.retry_ids, token, plan.retry_notes, progress=plan.retry_progress)
        await publish(send_messages, [mime[mid] for mid in plan.retry_ids], delay=plan.retry_delay_ms)
