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

PROMOTE_CHUNK = 100
STALE_QUEUED_SECONDS = 600


async def promote_due_messages(db: AsyncDatabase, settings: Settings) -> int:
    from actors.render import render_messages
    promoted = [d["_id"] for d in await messages.due_scheduled(db) if await messages.promote(db, d["_id"])]
    for start in range(0, len(promoted), PROMOTE_CHUNK):
        await asyncio.to_thread(render_messages.send, promoted[start:start + PROMOTE_CHUNK])
    return len(promoted)


async def requeue_stale(db: AsyncDatabase, settings: Settings) -> int:
    """Re-enqueue messages queued long ago and never rendered (an enqueue lost in a crash).
    Safe: rendering and sending are guarded, so a duplicate enqueue sends nothing twice."""
    from actors.render import render_messages
    stale = await messages.stale_queued(db, STALE_QUEUED_SECONDS)
    if stale:
        await messages.touch_queued(db, stale)
        await asyncio.to_thread(render_messages.send, stale)
    return len(stale)


async def purge_expired(db: AsyncDatabase, settings: Settings) -> int:
    return await rate_windows.purge_expired(db) + await idempotency.purge_expired(db)


JOBS = [promote_due_messages, requeue_stale, purge_expired]
JOB_MODULES: list[str] = ["mongo.send_limits", "ops.webhook_jobs", "ops.campaign_jobs", "ops.inbound",
                          "mongo.contact_removal"]


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
