"""The scheduler: promotes what has come due from the store onto the broker, and tidies.

Each job is `async def job(db, settings) -> int` (how much it did). Features add jobs by
listing their module in JOB_MODULES; a module exposes `JOBS`."""

from __future__ import annotations

import asyncio
import importlib
import logging

from pymongo.asynchronous.database import AsyncDatabase

from mongo import idempotency, messages, rate_windows
from pipelines.settings import Settings

log = logging.getLogger("postroom.scheduler")

RENDER_CHUNK = 100
# At most this many stalled messages are handed back per watchdog pass (one tick).
WATCHDOG_PASS_LIMIT = 500


async def _render(message_ids: list[str]) -> None:
    from actors.publish import publish
    from actors.render import render_messages
    for start in range(0, len(message_ids), RENDER_CHUNK):
        await publish(render_messages, message_ids[start:start + RENDER_CHUNK])


async def promote_due_messages(db: AsyncDatabase, settings: Settings) -> int:
    promoted = [d["_id"] for d in await messages.due_scheduled(db) if await messages.promote(db, d["_id"])]
    await _render(promoted)
    return len(promoted)


async def requeue_stalled_messages(db: AsyncDatabase, settings: Settings) -> int:
    """The watchdog, for every message (transactional and campaign alike): one whose next
    step was lost gets its render enqueued again.

    - `queued` and untouched for `message_stall_seconds`: its render job, or the send job
      carrying its MIME, was lost (a crash between store and broker, a purged queue). It
      is touched (`updated_at`) so the next passes leave it alone for as long again.
    - `sending` past its claim's lease: its worker died mid-send and the job carrying its
      MIME is gone too. It goes back to `queued` (guarded on the lapsed lease).

    Safe to repeat and to race a redelivered job: rendering writes nothing for a message
    that renders, and the send claim is the one guard, so only one attempt sends."""
    lapsed = await messages.lapsed_sending(db, WATCHDOG_PASS_LIMIT)
    room = WATCHDOG_PASS_LIMIT - len(lapsed)
    stale = await messages.stale_queued(db, settings.message_stall_seconds, room) if room > 0 else []
    if not lapsed and not stale:
        return 0
    await messages.requeue(db, stale, lapsed)
    await _render(lapsed + stale)
    log.warning("watchdog: rendering again %d queued message(s) left for %d s and %d whose send lease ran out",
                len(stale), settings.message_stall_seconds, len(lapsed))
    return len(lapsed) + len(stale)


async def purge_expired(db: AsyncDatabase, settings: Settings) -> int:
    return await rate_windows.purge_expired(db) + await idempotency.purge_expired(db)


JOBS = [promote_due_messages, requeue_stalled_messages, purge_expired]
# mongo.outbox first: events a dead front left in their documents are relayed before dispatch
JOB_MODULES: list[str] = ["mongo.outbox", "mongo.send_limits", "ops.webhook_jobs", "ops.campaign_jobs",
                          "ops.inbound", "mongo.contact_removal", "ops.automation_jobs"]


def all_jobs() -> list:
    jobs = list(JOBS)
    for name in JOB_MODULES:
        jobs.extend(importlib.import_module(name).JOBS)
    return jobs


async def run_once(db: AsyncDatabase, settings: Settings) -> dict[str, int]:
    done = {}
    for job in all_jobs():
        try:
            done[job.__name__] = await job(db, settings)
        except Exception:  # one failing job must not stop the others; it runs again next tick
            log.exception("scheduler job %s failed", job.__name__)
    return done


async def run_forever(settings: Settings, stop: asyncio.Event) -> None:
    from mongo.client import connect
    client, db = connect(settings.mongodb_url, settings.mongodb_database)
    try:
        while not stop.is_set():
            await run_once(db, settings)
            try:
                await asyncio.wait_for(stop.wait(), timeout=settings.scheduler_interval_seconds)
            except asyncio.TimeoutError:
                pass
    finally:
        await client.close()
