"""The `send` queue: rendered MIME → SMTP, many messages in flight per worker, under
limits shared by every worker process (pipelines/throttle.py over mongo/send_limits.py).

One job is a chunk of message ids. It claims them (guarded, so a redelivery sends
nothing twice), admits what the limits allow, sends the admitted ones concurrently over
the pooled connections, and applies the outcomes in bulk. Held messages go back to
`rendered` and ride the broker's delay queue (≤ 60 s, a window's length) — never
dropped, never waited for in a loop."""

from __future__ import annotations

import asyncio
import uuid

import dramatiq

from mongo import analytics, batches, campaigns, messages, outbox, send_limits
from pipelines.outcomes import OutcomePlan, plan_outcomes
from pipelines.throttle import Admission, DomainLimit, SendThrottle

from . import bounces as bounce_actor
from . import runtime

@dramatiq.actor(queue_name="send", max_retries=10, min_backoff=1000, max_backoff=60_000)
async def send_messages(message_ids: list[str], attempt: int = 0) -> None:
    db = runtime.store()
    claimed = await messages.claim_for_sending(db, message_ids, uuid.uuid4().hex,
                                               runtime.settings().send_lease_seconds)
    claimed = await campaigns.withhold_cancelled(db, claimed)  # a cancelled campaign sends no more
    if not claimed:
        return
    throttle = SendThrottle(send_limits.StoreLimiterBackend(db))
    admission = await throttle.admit(claimed, await _limits(db, claimed))
    await _hold(db, admission)
    try:
        results = await asyncio.gather(*(_deliver(m) for m in admission.admitted))
    finally:
        await throttle.release(admission)
    plan = plan_outcomes(results)
    await _apply(db, plan)


async def _limits(db, claimed: list[dict]):
    s = runtime.settings()
    return await send_limits.load_limits(
        db, claimed, default_key_rate_per_minute=s.email_rate_limit_per_minute,
        default_domain=DomainLimit(s.domain_rate_per_minute, s.domain_concurrency))


async def _hold(db, admission: Admission) -> None:
    if not admission.held:
        return
    held = [m["_id"] for m in admission.held]
    await messages.release_for_retry(db, held, {}, count_attempt=False)
    send_messages.send_with_options(args=(held,), delay=int(admission.retry_after_seconds * 1000))


async def _deliver(message: dict):
    mime = message.get("mime")
    if not mime:
        return message, None
    outcomes = await runtime.transport().send(mime["mail_from"], mime["recipients"],
                                              mime["data"].encode("ascii"), message["_id"])
    return message, outcomes


async def _apply(db, plan: OutcomePlan) -> None:
    """Outcomes in bulk: status changes, events, synchronous bounces, batch and analytics
    counts; then the transient failures go back for a later attempt."""
    await messages.advance(db, plan.transitions)
    await outbox.record_many(db, plan.events, only_subscribed=True)
    await batches.record_finished(db, plan.finished)
    await analytics.bump_many(db, plan.analytics)
    await bounce_actor.record_rejections(db, plan.bounces)
    if plan.retry_ids:
        await messages.release_for_retry(db, plan.retry_ids, plan.retry_notes)
        send_messages.send_with_options(args=(plan.retry_ids,), delay=plan.retry_delay_ms)
