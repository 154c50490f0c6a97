"""Cancel a campaign (POST /campaigns/:id/cancel): a scheduled one simply never starts; a
sending one stops fanning out (every batch checks the status) and its messages not yet
handed to SMTP become `cancelled` in a job of their own (`cancel_messages`)."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import campaigns
from pipelines.core.documents import Campaign
from pipelines.core.errors import Conflict
from pipelines.workflows.publisher import Publisher


async def cancel(db: AsyncDatabase, publisher: Publisher, campaign: Campaign) -> Campaign:
    """The campaign as cancelled (at once if it already was); 409 unless it was scheduled
    or sending."""
    if campaign["status"] == "cancelled":
        return campaign
    cancelled = await campaigns.cancel(db, campaign["workspace_id"], campaign["_id"])
    if cancelled is None:
        raise Conflict(f"The campaign is {campaign['status']}; only a scheduled or sending campaign can be cancelled.")
    if cancelled.get("started_at") and not cancelled.get("sandbox"):  # charged to the plan at start
        await campaigns.mark_refund_due(db, campaign["_id"])
        cancelled["refund_due"] = True
    if campaign["status"] == "sending":
        await publisher.cancel_campaign(campaign["_id"])
    return cancelled


async def cancel_messages(db: AsyncDatabase, campaign_id: str) -> None:
    """After a cancel: every message not yet handed to SMTP becomes `cancelled`."""
    await campaigns.cancel_unsent(db, campaign_id)
    await campaigns.refresh_status_counts(db, campaign_id)
