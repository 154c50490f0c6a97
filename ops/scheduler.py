"""The scheduler: promotes what has come due from the store onto the broker, and tidies.

Each job is `async def job(db, settings) -> int` (how much it did), a one-call shell over a
workflow (pipelines/workflows/) or a guarded write in mongo/. Features add theirs to
EVERY_PASS or TIDY below; this module keeps the loop: a pass runs its jobs in order, one
failing job never stops the others, and a stop lets the pass in hand finish briefly."""

from __future__ import annotations

import asyncio
import itertools
import logging

from dramatiq.errors import BrokerConnectionError
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import ConnectionFailure

from actors.runtime import publisher
from mongo import processes
from mongo.client import connect
from pipelines.core.clock import now_ms
from pipelines.core.errors import one_line
from pipelines.core.settings import Settings
from pipelines.workflows import message_watchdog, release_due_messages
from pipelines.workflows.publisher import PublishFailed

from . import automation_jobs, campaign_jobs, inbound, metrics_server, store_jobs, webhook_jobs

log = logging.getLogger("postroom.scheduler")


async def release_and_watch_messages(db: AsyncDatabase, settings: Settings) -> int:
    return await release_due_messages.release_and_watch(db, settings, publisher())


async def pick_up_accepted(db: AsyncDatabase, settings: Settings, started_ms: int) -> int:
    """Once, as the scheduler starts: accepted mail left without a job is handed on."""
    return await message_watchdog.pick_up_accepted(db, settings, publisher(), started_ms)


# Run in this order each pass. relay_stranded before dispatch_outbox: events a dead front
# left in their documents are relayed before the outbox is fanned out.
EVERY_PASS = [
    release_and_watch_messages,
    webhook_jobs.dispatch_outbox, webhook_jobs.wake_due_lanes,
    campaign_jobs.start_due_campaigns, campaign_jobs.finish_campaigns, campaign_jobs.revive_lapsed_parts,
    metrics_server.measure_scheduler_lag,
    automation_jobs.read_events_for_automations, automation_jobs.hand_due_runs_to_engine,
]
# Upkeep whose work is minutes or hours old when it is due (purges, expiries, events a dead
# process left STRANDED_AFTER_SECONDS ago, minute-precise date triggers, gauges scraped every
# few seconds): every TIDY_EVERY_PASSES-th pass, the first pass included. Run on every pass
# they were more than half of an idle pass's store commands.
TIDY = [
    store_jobs.relay_stranded, store_jobs.purge_expired, store_jobs.purge_lapsed_slots,
    campaign_jobs.refresh_finished_stats, campaign_jobs.refund_cancelled_campaigns,
    inbound.requeue_stale_reports, inbound.requeue_stale_inbound, inbound.apply_inbound_retention,
    store_jobs.purge_unrestorable, store_jobs.expire_signups, store_jobs.apply_message_retention,
    metrics_server.measure_backlogs, metrics_server.measure_automation_runs,
    automation_jobs.start_date_triggered_runs,
]
TIDY_EVERY_PASSES = 10
ALL_JOBS = [*TIDY[:1], *EVERY_PASS, *TIDY[1:]]


async def run_once(db: AsyncDatabase, settings: Settings, *, tidy: bool = True) -> dict[str, int]:
    done = {}
    for job in ALL_JOBS if tidy else EVERY_PASS:
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


async def _pass_unless_stopped(db: AsyncDatabase, settings: Settings, stop: asyncio.Event, *, tidy: bool) -> None:
    running = asyncio.ensure_future(run_once(db, settings, tidy=tidy))
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
        for pass_number in itertools.count():
            if stop.is_set():
                break
            await _pass_unless_stopped(db, settings, stop, tidy=pass_number % TIDY_EVERY_PASSES == 0)
            if stop.is_set():
                break
            try:  # after the pass: a reader of `passes` knows every EVERY_PASS job ran since it looked
                await processes.beat(db, "scheduler", name)
            except Exception as error:  # a heartbeat is informative; the next pass tries again
                log.warning("scheduler heartbeat not written: %s", one_line(error))
            try:
                await asyncio.wait_for(stop.wait(), timeout=settings.scheduler_interval_seconds)
            except TimeoutError:
                pass
    finally:
        await client.close()
