"""Scheduler jobs for webhooks, each a one-call shell over
pipelines/workflows/dispatch_webhook_events.py (why the order of its writes is crash-safe)."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from actors.runtime import publisher
from pipelines.core.settings import Settings
from pipelines.workflows import dispatch_webhook_events


async def dispatch_outbox(db: AsyncDatabase, settings: Settings) -> int:
    """New outbox events become deliveries on their subscriptions' lanes."""
    return await dispatch_webhook_events.dispatch_outbox(db, publisher())


async def wake_due_lanes(db: AsyncDatabase, settings: Settings) -> int:
    """Lanes with a delivery due and no job in flight get a turn."""
    return await dispatch_webhook_events.wake_due_lanes(db, publisher())
