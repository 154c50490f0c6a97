"""The `send` queue: rendered MIME → SMTP, many messages in flight per worker, under
limits shared by every worker process (pipelines/throttle.py over mongo/send_limits.py).

One job is a chunk of rendered messages, `{"_id", "mail_from", "recipients", "data"}`
each (`data`: the MIME), as the `render` actor made them, bounded by count and bytes
(pipelines/send_jobs.py), and a claim token fixed when the job was published. The MIME
travels in the job, not in the store: the store stays the one record of each message's
state, and the MIME is a derived artefact that can always be made again from the message
(a lost job costs a render, never a message: the scheduler's watchdog enqueues the render
again of what stays `queued`, or `sending` past its lease).

A job claims its messages (`queued` → `sending`, guarded, so a redelivered or duplicated
job sends nothing twice; a retry of the same job, holding the same token, takes its own
claim back), admits what the limits allow, sends the admitted ones concurrently over the
pooled connections — one message's failure, whatever it is, becomes that message's
outcome and touches no other — and applies the outcomes in bulk. Held messages and short
retries go back to `queued` and their MIME rides the broker's delay queue in a new job
(≤ 60 s); longer retries wait in the store (`next_attempt_at`) and the scheduler enqueues
their render when due.

Once SMTP has answered, the answers are kept in memory and every store write that records
them is retried until the store answers (`_persist`), for as long as the claim's lease
lasts: a store outage shorter than the lease never hands an accepted message back for
sending. A worker killed mid-send leaves its messages `sending`; once their lease runs
out, the redelivered job (or the watchdog's render) claims and sends them again, so only
what was in flight can arrive twice."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import dramatiq
from pymongo.errors import ConnectionFailure

from mongo import analytics, batches, campaigns, messages, outbox, send_limits
from pipelines import send_jobs
from pipelines.clock import utcnow
from pipelines.outcomes import OutcomePlan, plan_outcomes
from pipelines.recipients import owed_recipients
from pipelines.settings import SEND_LEASE_MARGIN_SECONDS
from pipelines.throttle import DomainLimit, SendThrottle
from pipelines.transport import unexpected

from . import bounces as bounce_actor
from . import metrics, runtime
from .publish import describe, publish

log = logging.getLogger("postroom.send")

# Waits between tries of a store write that records SMTP outcomes, seconds.
PERSIST_FIRST_PAUSE_SECONDS = 0.25
PERSIST_MAX_PAUSE_SECONDS = 5.0


@dramatiq.actor(queue_name="send", max_retries=10, min_backoff=1000, max_backoff=60_000)
async def send_messages(rendered: list[dict], claim_token: str = "") -> None:
    db, s = runtime.store(), runtime.settings()
    mime = {r["_id"]: r for r in rendered}
    token = claim_token or uuid.uuid4().hex  # the same for every retry of this job
    claimed_at = time.monotonic()
    claimed = await messages.claim_for_sending(db, list(mime), token, s.send_lease_seconds)
    claimed = await campaigns.withhold_cancelled(db, claimed)  # a cancelled campaign sends no more
    if not claimed:
        return
    throttle = SendThrottle(send_limits.StoreLimiterBackend(db))
    admission = await throttle.admit(claimed, await _limits(db, claimed))
    lease_end = claimed_at + s.send_lease_seconds - SEND_LEASE_MARGIN_SECONDS
    await _requeue(db, [m["_id"] for m in admission.held], mime, token,
                   admission.retry_after_seconds * 1000, lease_end)
    # Past its lease a claim may be given to another worker (the watchdog): start no SMTP
    # transaction that could outlast it, so only a dead worker's in-flight mail goes twice.
    start_by = lease_end - s.smtp_timeout_seconds
    try:
        answers = await asyncio.gather(*(_deliver(m, mime.get(m["_id"]), start_by) for m in admission.admitted),
                                       return_exceptions=True)
    finally:
        await _release(throttle, admission)
    results = [(m, _outcomes_or_error(m, answer)) for m, answer in zip(admission.admitted, answers)]
    plan = plan_outcomes([r for r in results if r[1] is not NOT_STARTED], now=utcnow(),
                         lifetime_seconds=s.send_retry_lifetime_seconds, scale=s.send_retry_scale)
    await _apply(db, plan, mime, token, lease_end)
    await _requeue(db, [m["_id"] for m, outcomes in results if outcomes is NOT_STARTED], mime, token, 0, lease_end)
    metrics.count_send_outcomes(plan.finished, [m for m in claimed if m["_id"] in set(plan.retry_ids)],
                                len(admission.held))


class HandoffFailed(Exception):
    """Some send jobs could not be published: `unpublished` names their messages."""

    def __init__(self, unpublished: list[str], cause: Exception):
        super().__init__(f"{len(unpublished)} message(s) not handed to the broker: {describe(cause)}")
        self.unpublished, self.cause = unpublished, cause


async def publish_rendered(rendered: list[dict], *, delay_ms: int = 0) -> None:
    """Send jobs for rendered messages, bounded by count and bytes, each with its own claim
    token (a retry of the job keeps it). Raises HandoffFailed at the first chunk the broker
    does not take."""
    jobs = list(send_jobs.chunks(rendered, max_bytes=runtime.settings().send_job_max_bytes))
    for n, chunk in enumerate(jobs):
        try:
            await publish(send_messages, chunk, uuid.uuid4().hex, **({"delay": delay_ms} if delay_ms else {}))
        except Exception as error:
            raise HandoffFailed([r["_id"] for job in jobs[n:] for r in job], error) from error


def _outcomes_or_error(message: dict, answer):
    if isinstance(answer, Exception):  # one message's failure is its own outcome, retried
        log.error("sending message %s failed unexpectedly: %r", message["_id"], answer,
                  extra={"message_id": message["_id"], "workspace_id": message.get("workspace_id")})
        return unexpected(list(message.get("to") or []), answer)
    if isinstance(answer, BaseException):  # cancelled: the job itself is going away
        raise answer
    return answer


async def _limits(db, claimed: list[dict]):
    s = runtime.settings()
    return await send_limits.load_limits(
        db, claimed, default_key_rate_per_minute=s.email_rate_limit_per_minute,
        default_domain=DomainLimit(s.domain_rate_per_minute, s.domain_concurrency))


async def _release(throttle: SendThrottle, admission) -> None:
    """Concurrency leases back; if the store cannot take them now they lapse on their own
    (pipelines/throttle.py LEASE_SECONDS), so this must not cost the outcomes."""
    try:
        await throttle.release(admission)
    except Exception as error:  # best effort: never at the cost of the outcomes in hand
        log.warning("could not give back send concurrency leases (%r); they lapse on their own", error)


async def _persist(lease_end: float, write, *args, **kwargs):
    """A store write recording what SMTP already answered: tried again until the store
    answers, while our claim's lease lasts (after it, the message may be someone else's)."""
    pause = PERSIST_FIRST_PAUSE_SECONDS
    while True:
        try:
            return await write(*args, **kwargs)
        except ConnectionFailure as error:
            if time.monotonic() + pause >= lease_end:
                raise
            log.warning("store unavailable (%s); recording send outcomes again in %.2f s", error, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, PERSIST_MAX_PAUSE_SECONDS)


async def _requeue(db, message_ids: list[str], mime: dict[str, dict], token: str, delay_ms: float,
                   lease_end: float) -> None:
    """Claimed but not tried (held by a throttle, or too late in the lease to start): back
    to `queued` without counting an attempt, the MIME in a new job after `delay_ms`."""
    if not message_ids:
        return
    await _persist(lease_end, messages.release_for_retry, db, message_ids, token, {}, count_attempt=False)
    await publish_rendered([mime[mid] for mid in message_ids], delay_ms=int(delay_ms))


NOT_STARTED = object()  # _deliver's outcome for a transaction not started in time


async def _deliver(message: dict, rendered: dict | None, start_by: float):
    if not rendered:
        return None
    # the claimed message says who is still owed (a retry after a partial delivery)
    still_owed = set(owed_recipients(message))
    owed = [r for r in rendered["recipients"] if r in still_owed]
    if not owed:  # every recipient settled already: nothing to send, the outcome decides
        return {}
    with metrics.SMTP_SECONDS.time():
        outcomes = await runtime.transport().send(rendered["mail_from"], owed, rendered["data"].encode("utf-8"),
                                                  message["_id"], start_by=start_by)
    return NOT_STARTED if outcomes is None else outcomes


async def _apply(db, plan: OutcomePlan, mime: dict[str, dict], token: str, lease_end: float) -> None:
    """Outcomes in bulk: status changes first (what decides whether a message could be
    sent again), then events, synchronous bounces, batch and analytics counts; then the
    transient failures go back for a later attempt — on the broker with their MIME, or
    waiting in the store."""
    await _persist(lease_end, messages.advance, db, plan.transitions, expected="sending")
    await _persist(lease_end, outbox.record_many, db, plan.events, only_subscribed=True)
    await _persist(lease_end, batches.record_finished, db, plan.finished)
    await _persist(lease_end, analytics.bump_many, db, plan.analytics)
    await _persist(lease_end, bounce_actor.record_rejections, db, plan.bounces)
    if plan.retry_ids:
        await _persist(lease_end, messages.release_for_retry, db, plan.retry_ids, token, plan.retry_notes,
                       progress=plan.retry_progress, next_attempt_at=plan.retries_in_store(utcnow()))
        for delay_ms, ids in plan.retries_by_broker_delay().items():
            await publish_rendered([mime[mid] for mid in ids], delay_ms=delay_ms)
