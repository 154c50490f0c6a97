"""Scheduler jobs for automations: each a pass over pipelines/workflows/automation_triggers.py
(which events start runs or end waits, which runs are due, which contacts' dates have come),
several batches per tick so a burst does not wait a tick per batch."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from actors.metrics import count_automation_runs
from actors.runtime import publisher
from mongo import automation_runs as run_store
from mongo import outbox
from pipelines.automations import runs
from pipelines.core.settings import Settings
from pipelines.workflows import automation_triggers

from .job_passes import drain

EVENT_BATCH = 500
DUE_BATCH = 500
PASSES_PER_TICK = 10


async def read_events_for_automations(db: AsyncDatabase, settings: Settings) -> int:
    async def read(events: list[dict]) -> None:
        count_automation_runs(await automation_triggers.read_events(db, publisher(), events))
    return await drain(lambda limit: outbox.pending_for_automations(db, limit), read,
                       batch=EVENT_BATCH, passes=PASSES_PER_TICK)


async def hand_due_runs_to_engine(db: AsyncDatabase, settings: Settings) -> int:
    return await drain(lambda limit: run_store.due(db, runs.now_ms(), limit),
                       lambda due: automation_triggers.hand_due_runs(db, publisher(), due),
                       batch=DUE_BATCH, passes=PASSES_PER_TICK)


async def start_date_triggered_runs(db: AsyncDatabase, settings: Settings) -> int:
    return await automation_triggers.start_date_triggered_runs(db, publisher())
