"""Cancel a campaign (POST /campaigns/:id/cancel): a scheduled one simply never starts; a
sending or paused one stops fanning out (every batch checks the status), its messages not
yet handed to SMTP become `cancelled` in a job of their own (`cancel_messages`), and the
parts a pause held go to jobs that record their recipients cancelled
(pause_campaign.release)."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import campaigns
from pipelines.core.documents import Campaign
from pipelines.core.errors import Conflict
from pipelines.core.settings import Settings
from pipelines.workflows import pause_campaign
from pipelines.workflows.publisher import Publisher


async def cancel(db: AsyncDatabase, settings: Settings, publisher: Publisher, campaign: Campaign) -> Campaign:
    """The campaign as cancelled (at once if it already was); 409 unless it was scheduled,
    sending or paused."""
    if campaign["status"] == "cancelled":
        return campaign
    cancelled = await campaigns.cancel(db, campaign["workspace_id"], campaign["_id"])
    if cancelled is None:
        raise Conflict(f"The campaign is {campaign['status']}; only a scheduled, sending or paused campaign "
                       "can be cancelled.")
    if cancelled.get("started_at") and not cancelled.get("sandbox"):  # charged to the plan at start
        await campaigns.mark_refund_due(db, campaign["_id"])
        cancelled["refund_due"] = True
    if campaign["status"] in ("sending", "paused"):
        await publisher.cancel_campaign(campaign["_id"])
        await pause_campaign.release(db, settings, publisher, cancelled)
    return cancelled


async def cancel_messages(db: AsyncDatabase, campaign_id: str) -> None:
    """After a cancel: every message not yet handed to SMTP becomes `cancelled`."""
    await campaigns.cancel_unsent(db, campaign_id)
    await campaigns.refresh_status_counts(db, campaign_id)
