"""Scheduler jobs for campaigns, each a one-call shell over
pipelines/workflows/campaign_upkeep.py (what each decides, and why it is safe to repeat)."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from actors.runtime import publisher
from pipelines.core.settings import Settings
from pipelines.workflows import campaign_upkeep


async def start_due_campaigns(db: AsyncDatabase, settings: Settings) -> int:
    return await campaign_upkeep.start_due_campaigns(db, settings, publisher())


async def finish_campaigns(db: AsyncDatabase, settings: Settings) -> int:
    return await campaign_upkeep.finish_campaigns(db, publisher())


async def revive_lapsed_parts(db: AsyncDatabase, settings: Settings) -> int:
    return await campaign_upkeep.revive_lapsed_parts(db, settings, publisher())


async def refresh_finished_stats(db: AsyncDatabase, settings: Settings) -> int:
    return await campaign_upkeep.refresh_finished_stats(db)


async def refund_cancelled_campaigns(db: AsyncDatabase, settings: Settings) -> int:
    return await campaign_upkeep.refund_cancelled_campaigns(db)
