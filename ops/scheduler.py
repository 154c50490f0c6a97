"""The scheduler: promotes what has come due from the store onto the broker, and tidies.

Each job is `async def job(db, settings) -> int` (how much it did). Features add theirs to
ALL_JOBS below."""

from __future__ import annotations

import asyncio
import logging

from actors.runtime import publisher
from dramatiq.errors import ConnectionError as BrokerConnectionError
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import ConnectionFailure

from mongo import batches, idempotency, messages, processes, rate_windows
from mongo.client import connect
from pipelines.messages import delivery_status
from pipelines.core.clock import ms_of, now_ms
from pipelines.messages.delivery_status import NEVER_MS
from pipelines.core.errors import one_line
from pipelines.core.settings import Settings
from pipelines.workflows.publisher import PublishFailed

from . import automation_jobs, campaign_jobs, inbound, metrics_server, store_jobs, webhook_jobs

log = logging.getLogger("postroom.scheduler")

# At most this many stalled messages are handed back per watchdog pass (one tick).
WATCHDOG_PASS_LIMIT = 500


async def _render(message_ids: list[str]) -> None:
    await publisher().render(message_ids)


async def promote_due_messages(db: AsyncDatabase, settings: Settings) -> int:
    # one write each, guarded: two schedulers never both enqueue one message
    promoted = [d["_id"] for d in await messages.due_scheduled(db)
                if await messages.apply(db, [delivery_status.promote(d["_id"])])]
    await _render(promoted)
    return len(promoted)


async def promote_due_retries(db: AsyncDatabase, settings: Settings) -> int:
    """SMTP retries that waited in the store (pipelines/messages/retry_schedule.py): rendered
    again when due (the same Message-ID and Date; the MIME was not kept)."""
    taken = [d["_id"] for d in await messages.due_retries(db)
             if await messages.take_due_retry(db, d["_id"], d["attempts"])]
    await _render(taken)
    return len(taken)


def _gave_up(doc: dict, settings: Settings) -> str:
    last = f"; last error: {doc['last_error']}" if doc.get("last_error") else ""
    return (f"gave up: handed back {doc.get('revivals') or 0} times by the watchdog and still not sent "
            f"(POSTROOM_MESSAGE_MAX_REVIVALS={settings.message_max_revivals}){last}")


async def requeue_stalled_messages(db: AsyncDatabase, settings: Settings) -> int:
    """The watchdog, for every message (transactional and campaign alike): one whose next
    step was lost gets its render enqueued again.

    - `queued` and untouched for `message_stall_seconds` (and not waiting in the store for
      its next SMTP attempt): its render job, or the send job carrying its MIME, was lost
      (a crash between store and broker, a purged queue, a job the broker refused). It is
      touched (`updated_at`) so the next passes leave it alone for as long again.
    - `sending` past its claim's lease: its worker died mid-send and the job carrying its
      MIME is gone too. It goes back to `queued` (guarded on the lapsed lease).

    Each hand-back counts (`revivals`; an SMTP deferral, real progress, resets it): a
    message handed back `message_max_revivals` times ends `failed` with the reason (its
    last error) instead of going round for ever. Safe to repeat and to race a redelivered
    job: rendering writes nothing for a message that renders, and the send claim is the
    one guard, so only one attempt sends."""
    lapsed = await messages.lapsed_sending(db, WATCHDOG_PASS_LIMIT)
    room = WATCHDOG_PASS_LIMIT - len(lapsed)
    stale = await messages.stale_queued(db, settings.message_stall_seconds, room) if room > 0 else []
    if not lapsed and not stale:
        return 0
    def spent(doc: dict) -> bool:
        return int(doc.get("revivals") or 0) >= settings.message_max_revivals
    if any(map(spent, lapsed + stale)):
        await _give_up(db, settings, [d for d in stale if spent(d)], [d for d in lapsed if spent(d)])
    lapsed_ids = [d["_id"] for d in lapsed if not spent(d)]
    stale_ids = [d["_id"] for d in stale if not spent(d)]
    now = now_ms()
    await messages.requeue(db, stale_ids, [delivery_status.revive(mid, lapsed_before=now) for mid in lapsed_ids])
    await _render(lapsed_ids + stale_ids)
    if lapsed_ids or stale_ids:
        log.warning("watchdog: rendering again %d queued message(s) left for %d s and %d whose send lease ran out",
                    len(stale_ids), settings.message_stall_seconds, len(lapsed_ids))
    return len(lapsed) + len(stale)


# At most this many messages are picked up at a start (more wait for the watchdog).
PICKUP_LIMIT = 100_000


def _orphaned(doc: dict, started_ms: int, in_process: bool) -> bool:
    """Accepted before this start and with no job left that will hand it on: with the
    in-process broker, every one (its jobs went with the process); with RabbitMQ, one
    whose born claim's lease ran out (the front stopped between its store write and its
    publish, or the job was lost) — an unclaimed one's job may still wait in its queue."""
    if ms_of(doc["updated_at"]) >= started_ms:
        return False  # written since: the running front published it
    return in_process or (bool(doc.get("lease_token")) and int(doc.get("lease_ms") or NEVER_MS) < started_ms)


async def pick_up_accepted(db: AsyncDatabase, settings: Settings, started_ms: int) -> int:
    """Once, when the scheduler starts (habit 18: work accepted but not handed on is
    picked up at start, not after POSTROOM_MESSAGE_STALL_SECONDS): queued messages left
    without a job (_orphaned) are handed back and rendered again; with the in-process
    broker, so are messages left `sending` (their worker was this service's, now gone).
    Nothing is sent twice: the send claim is the one guard (a render job that still holds
    a born claim finds it given back here, and claims nothing)."""
    in_process = not settings.amqp_url
    stale = [d["_id"] for d in await messages.in_flight(db, "queued", PICKUP_LIMIT)
             if _orphaned(d, started_ms, in_process)]
    lapsed = ([d["_id"] for d in await messages.in_flight(db, "sending", PICKUP_LIMIT)
               if ms_of(d["updated_at"]) < started_ms] if in_process else [])
    for start in range(0, len(stale) + len(lapsed), WATCHDOG_PASS_LIMIT):
        stale_part = stale[start:start + WATCHDOG_PASS_LIMIT]
        lapsed_part = lapsed[max(0, start - len(stale)):max(0, start + WATCHDOG_PASS_LIMIT - len(stale))]
        await messages.requeue(db, stale_part, [delivery_status.revive(mid, lapsed_before=NEVER_MS)
                                                for mid in lapsed_part])
        await _render(stale_part + lapsed_part)
    if stale or lapsed:
        log.warning("scheduler start: picked up %d queued and %d sending message(s) left without a job",
                    len(stale), len(lapsed))
    return len(stale) + len(lapsed)


async def _give_up(db: AsyncDatabase, settings: Settings, stale: list[dict], lapsed: list[dict]) -> None:
    now = now_ms()
    moved = set(await messages.apply_each(
        db, [delivery_status.give_up(d["_id"], _gave_up(d, settings)) for d in stale]
        + [delivery_status.give_up(d["_id"], _gave_up(d, settings), lapsed_before=now) for d in lapsed]))
    await batches.record_finished(db, [(d, "failed") for d in stale + lapsed if d["_id"] in moved])
    log.error("watchdog: gave up on %d message(s) handed back %d times", len(moved), settings.message_max_revivals)


async def purge_expired(db: AsyncDatabase, settings: Settings) -> int:
    return await rate_windows.purge_expired(db) + await idempotency.purge_expired(db)


# Run in this order each pass. relay_stranded before dispatch_outbox: events a dead front
# left in their documents are relayed before the outbox is fanned out.
ALL_JOBS = [
    promote_due_messages, promote_due_retries, requeue_stalled_messages, purge_expired,
    store_jobs.relay_stranded, store_jobs.purge_lapsed_slots,
    webhook_jobs.dispatch_outbox, webhook_jobs.wake_due_lanes,
    campaign_jobs.start_due_campaigns, campaign_jobs.finish_campaigns, campaign_jobs.refresh_finished_stats,
    campaign_jobs.refund_cancelled_campaigns, campaign_jobs.revive_lapsed_parts,
    inbound.requeue_stale_reports,
    store_jobs.purge_unrestorable, store_jobs.expire_signups,
    metrics_server.measure_scheduler_lag,
    automation_jobs.read_events_for_automations, automation_jobs.hand_due_runs_to_engine,
    automation_jobs.start_date_triggered_runs,
]


async def run_once(db: AsyncDatabase, settings: Settings) -> dict[str, int]:
    done = {}
    for job in ALL_JOBS:
        try:
            done[job.__name__] = await job(db, settings)
        except ConnectionFailure as error:  # every job needs the store: try them all next tick
            log.warning("scheduler: store unreachable (%s); jobs wait for it", type(error).__name__)
            break
        except (BrokerConnectionError, PublishFailed) as error:  # an outage, not a bug: one line, no trace
            log.warning("scheduler job %s: broker unreachable (%s)", job.__name__, one_line(error))
        except Exception:  # one failing job must not stop the others; it runs again next tick
            log.exception("scheduler job %s failed", job.__name__)
    return done


# After SIGTERM the pass in hand has this long to finish, then it is cancelled: a pass can
# take tens of seconds on a loaded store, and every job is a guarded write that the next
# pass (or the watchdog) repeats, so a pass cut short loses nothing.
STOP_GRACE_SECONDS = 2.0


async def _pass_unless_stopped(db: AsyncDatabase, settings: Settings, stop: asyncio.Event) -> None:
    running = asyncio.ensure_future(run_once(db, settings))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not running.done():
            await asyncio.wait({running}, timeout=STOP_GRACE_SECONDS)
    finally:
        stopping.cancel()
        if not running.done():
            log.info("scheduler: stopping in the middle of a pass; the next start repeats it")
            running.cancel()
        await asyncio.gather(running, stopping, return_exceptions=True)


async def run_forever(settings: Settings, stop: asyncio.Event) -> None:
    started_ms = now_ms()
    client, db = connect(settings.mongodb_url, settings.mongodb_database)
    try:
        name = processes.process_name("scheduler")
        try:
            await pick_up_accepted(db, settings, started_ms)
        except Exception as error:  # the watchdog still finds them, later
            log.warning("scheduler start: accepted mail not picked up (%s); the watchdog will", one_line(error))
        while not stop.is_set():
            await _pass_unless_stopped(db, settings, stop)
            if stop.is_set():
                break
            try:  # after the pass: a reader of `passes` knows every job ran since it looked
                await processes.beat(db, "scheduler", name)
            except Exception as error:  # a heartbeat is informative; the next pass tries again
                log.warning("scheduler heartbeat not written: %s", one_line(error))
            try:
                await asyncio.wait_for(stop.wait(), timeout=settings.scheduler_interval_seconds)
            except asyncio.TimeoutError:
                pass
    finally:
        await client.close()
