"""A campaign's commands before it starts (start_campaign.py) or is cancelled
(cancel_campaign.py): create a draft, schedule it, and refresh the status counts a read
shows of a campaign small enough to count live."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import campaigns
from pipelines.campaigns import stats as campaign_stats
from pipelines.core.clock import ms_of, now_iso
from pipelines.core.documents import Campaign, Workspace
from pipelines.core.errors import Conflict
from pipelines.core.ids import new_uuid
from pipelines.core.settings import Settings
from pipelines.workflows.start_campaign import check_references, resolve_sender

# Up to this many recipients GET /campaigns/:id counts statuses live; above it, the
# snapshot the scheduler refreshes every few seconds is shown (see `stats_at`).
LIVE_STATS_MAX_RECIPIENTS = 10_000


async def create(db: AsyncDatabase, settings: Settings, workspace: Workspace, fields: dict, *, key_id: str | None,
                 sandbox: bool) -> Campaign:
    """A draft with the body's `fields`, once its template, audience and sender hold (404, 400)."""
    workspace_id = workspace["_id"]
    await check_references(db, workspace_id, fields["template_id"], fields["list_id"], fields["segment_id"])
    await resolve_sender(db, workspace, fields["from_email"], fields["from_name"], fields["reply_to"],
                         shared_domain=settings.shared_domain)
    now = now_iso()
    doc: Campaign = {
        "_id": new_uuid(), "workspace_id": workspace_id, "key_id": key_id, "sandbox": sandbox,
        "name": fields["name"], "subject": fields["subject"], "template_id": fields["template_id"],
        "list_id": fields["list_id"], "segment_id": fields["segment_id"], "from_email": fields["from_email"],
        "from_name": fields["from_name"], "reply_to": fields["reply_to"], "track_opens": fields["track_opens"],
        "track_clicks": fields["track_clicks"],
        "status": "draft", "send_at": None, "created_at": now, "created_ms": ms_of(now), "updated_at": now,
        "total_recipients": 0,
        "batches_queued": 0, "batches_done": 0, "messages_created": 0, "fanout_done": False,
        "status_counts": {}, "stats_at": None, **campaign_stats.ZERO_COUNTERS,
    }
    return await campaigns.insert(db, doc)


async def schedule(db: AsyncDatabase, campaign: Campaign, send_at: str) -> Campaign:
    """The campaign scheduled at `send_at`; 409 unless it is a draft or scheduled already."""
    scheduled = await campaigns.schedule(db, campaign["workspace_id"], campaign["_id"], send_at)
    if scheduled is None:
        raise Conflict(f"The campaign is {campaign['status']}; only a draft or scheduled campaign can be scheduled.")
    return scheduled


async def with_live_counts(db: AsyncDatabase, campaign: Campaign) -> Campaign:
    """The campaign with its status counts counted now (and kept) when it has sent and is
    small enough; else as stored."""
    if campaign["status"] in ("sending", "paused", "sent", "cancelled") \
            and campaign.get("total_recipients", 0) <= LIVE_STATS_MAX_RECIPIENTS:
        return {**campaign, "status_counts": await campaigns.refresh_status_counts(db, campaign["_id"]),
                "stats_at": now_iso()}
    return campaign
