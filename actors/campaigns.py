"""The `campaigns` queue: a sending campaign fanned out into recipient batches
(pipelines/workflows/fan_out_campaign.py), and a cancelled one's unsent messages
cancelled (pipelines/workflows/cancel_campaign.py)."""

from __future__ import annotations

import dramatiq

from pipelines.workflows.cancel_campaign import cancel_messages
from pipelines.workflows.fan_out_campaign import fan_out

from . import runtime
from .retries import job_options


@dramatiq.actor(**job_options("campaigns"))
async def fan_out_campaign(campaign_id: str, batch: int) -> None:
    await fan_out(runtime.store(), runtime.settings(), runtime.publisher(), campaign_id, batch)


@dramatiq.actor(**job_options("campaigns"))
async def cancel_campaign_messages(campaign_id: str) -> None:
    await cancel_messages(runtime.store(), campaign_id)
