"""Campaigns: create, list, read (with stats and rates), send, schedule, cancel, and pause
and resume (beside the spec: docs/campaigns.md)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints
from quart import Blueprint

from mongo import campaigns as campaign_store
from pipelines import views
from pipelines.core.clock import future_within, iso
from pipelines.core.documents import Campaign
from pipelines.core.errors import ValidationFailed
from pipelines.workflows import cancel_campaign, manage_campaigns, pause_campaign, start_campaign

from ..enqueue import enqueue
from ..idempotency import idempotent
from ..lookup import owned
from ..pagination import PageQuery
from ..resource_routes import list_route
from ..responses import one
from ..runtime import caller, db, settings
from ..types import DisplayName, EmailAddress, Id, Strict
from ..validation import body

bp = Blueprint("campaigns", __name__, url_prefix="/api/v1")

MAX_SCHEDULE_AHEAD = dt.timedelta(days=365)

CampaignStatus = Literal["draft", "scheduled", "sending", "paused", "sent", "cancelled", "failed"]


class CreateCampaign(Strict):
    # Exactly one of list_id, segment_id (null counts as not given), said in the document too
    model_config = ConfigDict(json_schema_extra={"oneOf": [
        {"required": ["list_id"], "properties": {"list_id": {"type": "string"}, "segment_id": {"type": "null"}}},
        {"required": ["segment_id"], "properties": {"segment_id": {"type": "string"}, "list_id": {"type": "null"}}},
    ]})
    name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    subject: Annotated[str, StringConstraints(min_length=1, max_length=998)] = Field(
        description="May contain merge tags; rendered per recipient.")
    template_id: Id
    list_id: Id | None = Field(None, description="Send to this list's members. Exactly one of list_id, segment_id.")
    segment_id: Id | None = Field(None, description="Send to the contacts matching this segment at send time.")
    from_email: EmailAddress | None = Field(None, description="Defaults to the workspace's default sender.")
    from_name: DisplayName | None = Field(None, description="Display name of the sender (no control characters).")
    reply_to: EmailAddress | None = None
    track_opens: bool = Field(True, description="Campaigns track opens unless this is false.")
    track_clicks: bool = Field(True, description="Campaigns track clicks unless this is false.")


class CampaignQuery(PageQuery):
    status: CampaignStatus | None = Field(None, description="Only campaigns in this state.")


class ScheduleCampaign(Strict):
    send_at: dt.datetime = Field(description="ISO 8601; in the future and within 365 days.")


@bp.post("/campaigns")
@idempotent()
@body(CreateCampaign)
async def create(data: CreateCampaign):
    if (data.list_id is None) == (data.segment_id is None):
        raise ValidationFailed("Give exactly one of list_id or segment_id.",
                               path="segment_id" if data.list_id else "list_id")
    who = caller()
    doc = await manage_campaigns.create(db(), settings(), who.workspace, data.model_dump(), key_id=who.key_id,
                                        sandbox=who.sandbox)
    return one(views.campaign(doc), 201)


list_route(bp, "/campaigns", "list_campaigns", CampaignQuery, campaign_store.list_page, by=["status"],
           view=views.campaign)


async def with_counts(campaign_id: str) -> dict:
    """The caller's campaign (404 when not theirs) with its status counts counted now when
    it is small enough (GET /campaigns/:id, the console's campaign page)."""
    return await manage_campaigns.with_live_counts(db(), await owned(campaign_store, campaign_id, "campaign"))


async def cancel_owned(campaign_id: str) -> dict:
    """The caller's campaign, cancelled (POST /campaigns/:id/cancel, the console's button)."""
    doc = await owned(campaign_store, campaign_id, "campaign")
    return await enqueue(lambda publisher: cancel_campaign.cancel(db(), settings(), publisher, doc))


async def pause_owned(campaign_id: str) -> Campaign:
    """The caller's campaign, paused (POST /campaigns/:id/pause, the console's button)."""
    return await pause_campaign.pause(db(), await owned(campaign_store, campaign_id, "campaign"))


async def resume_owned(campaign_id: str) -> Campaign:
    """The caller's campaign, sending again (POST /campaigns/:id/resume, the console's button)."""
    doc = await owned(campaign_store, campaign_id, "campaign")
    return await enqueue(lambda publisher: pause_campaign.resume(db(), settings(), publisher, doc))


@bp.get("/campaigns/<uuid:campaign_id>")
async def read(campaign_id: str):
    return one(views.campaign(await with_counts(campaign_id)))


@bp.post("/campaigns/<uuid:campaign_id>/send/api")
@idempotent(required=True)
async def send(campaign_id: str):
    doc, who = await owned(campaign_store, campaign_id, "campaign"), caller()
    started = await enqueue(lambda publisher: start_campaign.start(
        db(), settings(), publisher, who.workspace, doc, key_id=who.key_id, sandbox=who.sandbox))
    return one({"campaign_id": started["_id"], "status": started["status"],
                "total_recipients": started["total_recipients"],
                "batches_queued": started["batches_queued"]}, 202)


@bp.post("/campaigns/<uuid:campaign_id>/schedule")
@body(ScheduleCampaign)
async def schedule(campaign_id: str, data: ScheduleCampaign):
    doc = await owned(campaign_store, campaign_id, "campaign")
    when = future_within(data.send_at, MAX_SCHEDULE_AHEAD, "365 days", path="send_at")
    return one(views.campaign(await manage_campaigns.schedule(db(), doc, iso(when))))


@bp.post("/campaigns/<uuid:campaign_id>/cancel")
async def cancel(campaign_id: str):
    return one(views.campaign(await cancel_owned(campaign_id)))


@bp.post("/campaigns/<uuid:campaign_id>/pause")
async def pause(campaign_id: str):
    return one(views.campaign(await pause_owned(campaign_id)))


@bp.post("/campaigns/<uuid:campaign_id>/resume")
async def resume(campaign_id: str):
    return one(views.campaign(await resume_owned(campaign_id)))
