"""Send a chunk of rendered messages: rendered MIME → SMTP, many messages in flight per
worker, under limits shared by every worker process (pipelines/messages/throttle.py over
mongo/send_limits.py).

One job is a chunk of rendered messages, `{"_id", "mail_from", "recipients", "data"}`
each (`data`: the MIME), as the render step made them, bounded by count and bytes
(pipelines/messages/send_jobs.py), and a claim token fixed when the job was published. The MIME
travels in the job, not in the store: the store stays the one record of each message's
state, and the MIME is a derived artefact that can always be made again from the message
(a lost job costs a render, never a message: the scheduler's watchdog,
pipelines/workflows/message_watchdog.py, enqueues the render again of what stays
`queued`, or `sending` past its lease).

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
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Sequence

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import ConnectionFailure

from mongo import analytics, batches, campaigns, domain_stats, messages, outbox, send_limits
from mongo.messages import Held
from pipelines.audience import recipients
from pipelines.audience.recipients import owed_recipients
from pipelines.core.clock import in_seconds, ms_of, now_ms, utcnow
from pipelines.core.settings import SEND_LEASE_MARGIN_SECONDS, Settings
from pipelines.messages import delivery_status, send_jobs
from pipelines.messages.outcomes import OutcomePlan, plan_outcomes, unexpected
from pipelines.messages.throttle import DomainLimit, SendThrottle
from pipelines.workflows.bounce_reports import record_rejections
from pipelines.workflows.publisher import Publisher

log = logging.getLogger("postroom.send")

# Waits between tries of a store write that records SMTP outcomes, seconds.
PERSIST_FIRST_PAUSE_SECONDS = 0.25
PERSIST_MAX_PAUSE_SECONDS = 5.0


@dataclasses.dataclass(frozen=True)
class Sent:
    """What one job did, for the worker's metrics: the messages that ended (with their
    outcome), those deferred for a retry, and how many a throttle held back."""
    finished: list[tuple[dict, str]]
    deferred: list[dict]
    held: int


@dataclasses.dataclass(frozen=True)
class Claim:
    """Messages held for sending (their SEND_FIELDS or whole documents): `sending` under
    the job's claim `token`, or still `queued` under the born claim they were stored with
    (delivery_status.born_claim); and when the first of their leases ends (monotonic, less
    a margin)."""
    token: str
    lease_end: float
    messages: list[dict]
    # made in memory and not stored yet (a campaign part's, render_chunk.render_part):
    # each is inserted once, as the first transition recorded for it leaves it
    unstored: bool = False
    # read whole (a render job's): their writes replace them whole (messages.Held)
    whole: bool = False

    def held(self) -> Held:
        return messages.Held.of(self.messages, whole=self.whole)

    async def record(self, db: AsyncDatabase, transitions: list) -> int:
        """Write transitions of held messages: guarded updates under the claim, or, for
        unstored messages, their one insert."""
        if self.unstored:
            return await messages.insert_moved(db, {m["_id"]: m for m in self.messages}, transitions)
        return await messages.apply(db, transitions, held=self.held())


@dataclasses.dataclass(frozen=True)
class _Job:
    db: AsyncDatabase
    publisher: Publisher
    mime: dict[str, dict]
    claim: Claim
    lease_seconds: int

    def handoff(self, delay_ms: float) -> _Handoff:
        """The born claim of a send job about to be published with `delay_ms`: its lease
        runs from the job's due time."""
        token = send_jobs.new_claim_token()
        return _Handoff(token, delivery_status.born_claim(token, in_seconds(delay_ms / 1000 + self.lease_seconds),
                                                          job_due_ms=now_ms() + int(delay_ms)))


@dataclasses.dataclass(frozen=True)
class _Handoff:
    """Messages going back to `queued` for a send job published just after the write are
    stored born claimed by it (delivery_status.hold/retry `handed_to`): a worker killed
    between the write and the publish leaves them to the watchdog at the lease's end,
    not to POSTROOM_MESSAGE_STALL_SECONDS."""
    token: str
    fields: dict


async def send_chunk(db: AsyncDatabase, settings: Settings, publisher: Publisher, transport,
                     rendered: list[dict], claim_token: str = "", born: Sequence[str] = ()) -> Sent:
    """`transport`: pipelines/transport (send(mail_from, recipients, data, name, start_by=))."""
    mime = {r["_id"]: r for r in rendered}
    claim = await claim_messages(db, settings, list(mime), claim_token, born=born)
    return await deliver(db, settings, publisher, transport, claim, mime)


async def claim_messages(db: AsyncDatabase, settings: Settings, message_ids: list[str], token: str = "",
                         *, whole: bool = False, born: Sequence[str] = ()) -> Claim:
    """Claim the messages still to send (`whole`: read back whole, for rendering), a
    cancelled campaign's left out (and cancelled). `token`: the job's (the same for
    every retry of it), else a new one. `born`: the born claims the job was published
    with (delivery_status.born_claim): a message stored under one of them, with at least
    half its lease left, is held as it is, with no write; one with less is claimed."""
    token = token or uuid.uuid4().hex
    claimed_at = time.monotonic()
    lease_end = claimed_at + settings.send_lease_seconds - SEND_LEASE_MARGIN_SECONDS
    kept: list[dict] = []
    claiming = list(message_ids)
    converting: dict[str, str] = {}
    if born:
        kept, claiming, converting = await _born_claims(db, message_ids, set(born), settings.send_lease_seconds,
                                                        whole)
        for m in kept:  # the monotonic clock, from the wall clock's lease left
            lease_end = min(lease_end, claimed_at + (ms_of(m["lease_until"]) - now_ms()) / 1000
                            - SEND_LEASE_MARGIN_SECONDS)
    claimed = await messages.claim_for_sending(db, claiming, token, settings.send_lease_seconds, whole=whole,
                                               born=converting)
    held = await campaigns.withhold_stopped(db, kept + claimed)  # a cancelled or paused campaign sends no more
    return Claim(token, lease_end, held, whole=whole)


async def _born_claims(db: AsyncDatabase, message_ids: list[str], born: set[str], lease_seconds: int,
                       whole: bool) -> tuple[list[dict], list[str], dict[str, str]]:
    """The messages still held under one of the `born` claims with at least half their
    lease left (read as they are), the ids to claim (still queued or sending: a message
    already sent or final is left alone), and of those, the born claims held with too
    little lease left (id → born token), turned into the job's claim."""
    docs = await messages.load(db, message_ids, None if whole else messages.SEND_FIELDS)
    keep_ms = now_ms() + lease_seconds * 1000 // 2
    kept, claiming, converting = [], [], {}
    for m in docs:
        if m["status"] == "queued" and m.get("lease_token") in born:
            if ms_of(m["lease_until"]) >= keep_ms:
                kept.append(m)
                continue
            converting[m["_id"]] = m["lease_token"]
        if m["status"] in ("queued", "sending"):
            claiming.append(m["_id"])
    return kept, claiming, converting


async def deliver(db: AsyncDatabase, settings: Settings, publisher: Publisher, transport, claim: Claim,
                  mime: dict[str, dict], *, halted: Callable[[], bool] | None = None) -> Sent:
    """Send the claimed messages' MIME (`mime`: by message id) under the limits and record
    the outcomes. `halted` (a campaign part's job: its campaign paused or cancelled): once
    it says so, no transaction starts, and the part's messages not started are left
    unrecorded (the part is held and runs again: render_chunk.render_part)."""
    claimed = claim.messages
    if not claimed:
        return Sent([], [], 0)
    job = _Job(db, publisher, mime, claim, settings.send_lease_seconds)
    throttle = SendThrottle(send_limits.StoreLimiterBackend(db))
    admission = await throttle.admit(claimed, await _limits(db, settings, claimed))
    await _requeue(job, [m["_id"] for m in admission.held], admission.retry_after_seconds * 1000)
    # Past its lease a claim may be given to another worker (the watchdog): start no SMTP
    # transaction that could outlast it, so only a dead worker's in-flight mail goes twice.
    start_by = claim.lease_end - settings.smtp_timeout_seconds
    try:
        answers = await asyncio.gather(*(_deliver(transport, m, mime.get(m["_id"]), start_by, halted)
                                         for m in admission.admitted), return_exceptions=True)
    finally:
        await _release(throttle, admission)
    results = [(m, _outcomes_or_error(m, answer)) for m, answer in zip(admission.admitted, answers, strict=True)]
    plan = plan_outcomes([r for r in results if r[1] is not NOT_STARTED], now=utcnow(),
                         lifetime_seconds=settings.send_retry_lifetime_seconds, scale=settings.send_retry_scale,
                         rendered_at={mid: r["rendered_at"] for mid, r in mime.items() if r.get("rendered_at")})
    await _apply(job, plan)
    if not (claim.unstored and halted is not None and halted()):
        await _requeue(job, [m["_id"] for m, outcomes in results if outcomes is NOT_STARTED], 0)
    retried = set(plan.retry_ids)
    return Sent(plan.finished, [m for m in claimed if m["_id"] in retried], len(admission.held))


def _outcomes_or_error(message: dict, answer):
    if isinstance(answer, Exception):  # one message's failure is its own outcome, retried
        log.error("sending message %s failed unexpectedly: %r", message["_id"], answer,
                  extra={"message_id": message["_id"], "workspace_id": message.get("workspace_id")})
        return unexpected(recipients.envelope(message), answer)
    if isinstance(answer, BaseException):  # cancelled: the job itself is going away
        raise answer
    return answer


async def _limits(db: AsyncDatabase, settings: Settings, claimed: list[dict]):
    return await send_limits.load_limits(
        db, claimed, default_key_rate_per_minute=settings.email_rate_limit_per_minute,
        default_domain=DomainLimit(settings.domain_rate_per_minute, settings.domain_concurrency))


async def _release(throttle: SendThrottle, admission) -> None:
    """Concurrency leases back; if the store cannot take them now they lapse on their own
    (pipelines/messages/throttle.py LEASE_SECONDS), so this must not cost the outcomes."""
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


async def _requeue(job: _Job, message_ids: list[str], delay_ms: float) -> None:
    """Claimed but not tried (held by a throttle, or too late in the lease to start): back
    to `queued` without counting an attempt, the MIME in a new job after `delay_ms`."""
    if not message_ids:
        return
    held, handoff = job.claim.held(), job.handoff(delay_ms)
    await _persist(job.claim.lease_end, job.claim.record, job.db,
                   [delivery_status.hold(mid, held.claims[mid][1], current=held.claims[mid][0],
                                         handed_to=handoff.fields) for mid in message_ids])
    await job.publisher.send([job.mime[mid] for mid in message_ids], delay_ms=int(delay_ms), born=[handoff.token])


NOT_STARTED = object()  # _deliver's outcome for a transaction not started in time


async def _deliver(transport, message: dict, rendered: dict | None, start_by: float,
                   halted: Callable[[], bool] | None = None):
    if not rendered:
        return None
    # the claimed message says who is still owed (a retry after a partial delivery)
    still_owed = set(owed_recipients(message))
    owed = [r for r in rendered["recipients"] if r in still_owed]
    if not owed:  # every recipient settled already: nothing to send, the outcome decides
        return {}
    halt = {"halted": halted} if halted is not None else {}
    outcomes = await transport.send(rendered["mail_from"], owed, rendered["data"].encode("utf-8"),
                                    message["_id"], start_by=start_by, crlf_only=rendered.get("crlf_only", False),
                                    **halt)
    return NOT_STARTED if outcomes is None else outcomes


async def _apply(job: _Job, plan: OutcomePlan) -> None:
    """Outcomes in bulk: events first, then status changes, synchronous bounces, batch and
    analytics counts; then the transient failures go back for a later attempt — on the
    broker with their MIME, or waiting in the store. The history each message had when
    claimed is written back whole with the new entries (messages.apply: a plain `$set`
    under our claim).

    Why events go first: a message recorded `sent` is never sent again, so its events
    must already be stored when that status lands — written after it, a failure in
    between (a stop, a crash, the store going away) loses them for good, since the
    redelivered job skips the message. Written before it, the same failure leaves the
    message `sending`: it is sent again under a new claim (only what was in flight can
    arrive twice, as before) and its events, whose ids are derived from the message
    (`<message id>:<event>`), are not stored twice."""
    db, claim = job.db, job.claim
    lease_end = claim.lease_end
    by_broker = plan.retries_by_broker_delay()
    handoffs = {delay_ms: job.handoff(delay_ms) for delay_ms in by_broker}
    handed_to = {mid: handoffs[delay_ms].fields for delay_ms, ids in by_broker.items() for mid in ids}
    retries = plan.retry_transitions(claim.held().claims, utcnow(), handed_to) if plan.retry_ids else []
    if claim.unstored:  # each message's one insert: the retries too (their send jobs claim them)
        transitions, retries = plan.transitions + retries, []
    else:
        transitions = plan.transitions
    await _persist(lease_end, outbox.record_many, db, plan.events, only_subscribed=True)
    await _persist(lease_end, claim.record, db, transitions)
    await _persist(lease_end, batches.record_finished, db, plan.finished)
    await _persist(lease_end, analytics.bump_many, db, plan.analytics)
    await _persist(lease_end, domain_stats.bump_many, db, plan.domains)
    await _persist(lease_end, record_rejections, db, plan.bounces)
    await _persist(lease_end, claim.record, db, retries)
    for delay_ms, ids in by_broker.items():
        await job.publisher.send([job.mime[mid] for mid in ids], delay_ms=delay_ms, born=[handoffs[delay_ms].token])
