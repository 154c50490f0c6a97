"""The operator view, across workspaces: queue depths, the oldest item waiting in the
store for each kind of work, processes and their heartbeats, the scheduler's lag, and the
webhook, outbox and automation backlogs — what `postroom status` shows, on the same
reads (mongo/operations.py, actors/queue_inspection.py)."""

from __future__ import annotations

import asyncio

from actors.queue_inspection import IN_PROCESS_FRESH_SECONDS, counts_or_note
from mongo import operations, processes
from pipelines.core.clock import in_seconds

from ..runtime import db, settings
from . import bp
from .guard import OPERATOR, page, render

SEEN_WITHIN_SECONDS = 3600  # processes shown: those seen in the last hour
ALIVE_WITHIN_SECONDS = 60.0  # …alive: seen this recently (`postroom status`'s default window)


@page(bp, "/operator", area=OPERATOR)
async def operator_view():
    seen = await processes.recent(db(), in_seconds(-SEEN_WITHIN_SECONDS))
    alive_since, fresh_since = in_seconds(-ALIVE_WITHIN_SECONDS), in_seconds(-IN_PROCESS_FRESH_SECONDS)
    rows = [{**p, "age_seconds": operations.age_seconds(p.get("seen_at")), "alive": p.get("seen_at", "") >= alive_since}
            for p in seen]
    fresh = [p for p in seen if p.get("seen_at", "") >= fresh_since]
    # the broker's client blocks: asked off the serving loop
    queues, note = await asyncio.to_thread(counts_or_note, settings().amqp_url, fresh)
    oldest = await operations.oldest_waiting(db())
    scheduler = next((p for p in rows if p.get("kind") == "scheduler"), None)
    return await render("operator.html", title="Operator view", processes=rows, queues=queues, queues_note=note,
                        oldest=oldest, backlogs=await operations.backlogs(db()), scheduler=scheduler)
