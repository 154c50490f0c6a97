"""Start sending a campaign (POST /campaigns/:id/send/api, and the scheduler at `send_at`).

Template and sender are resolved now and the audience is counted (not resolved: that is
the first fan-out job's, workflows/fan_out_campaign.py, so the answer does not grow with
the audience); the count is charged to the workspace's monthly plan (403 limit_reached
past it, nothing sent; sandbox campaigns count nothing); the campaign moves to `sending`
with what the fan-out resolves the audience from, as of now (guarded: of two concurrent
starts one wins, the other gets 409 and its charge back), campaign.sent is recorded and
the fan-out is started. A campaign with nobody to send to is sent at once."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import campaign_audience, domains, lists, outbox, segments, send_limits, templates
from mongo import campaigns as campaign_store
from pipelines.campaigns import fanout as campaign_fanout
from pipelines.core.clock import now_iso, utcnow
from pipelines.core.documents import Campaign, Template, Workspace
from pipelines.core.errors import Conflict, Forbidden, NotFound
from pipelines.core.settings import Settings
from pipelines.messages import sender as sender_rules
from pipelines.messages import throttle
from pipelines.workflows.publisher import Publisher


async def check_references(db: AsyncDatabase, workspace_id: str, template_id: str,
                           list_id: str | None, segment_id: str | None) -> tuple[Template, dict]:
    """The template and the list or segment, or 404 (template_not_found / not_found)."""
    template = await templates.get(db, workspace_id, template_id)
    if template is None:
        raise NotFound("No such template in this workspace.", code="template_not_found", path="template_id")
    if list_id is not None:
        audience = await lists.get(db, workspace_id, list_id)
        if audience is None:
            raise NotFound("No such list in this workspace.", path="list_id")
    else:
        # the body names a list or a segment (the front's model); no id finds none
        audience = await segments.get(db, workspace_id, segment_id or "")
        if audience is None:
            raise NotFound("No such segment in this workspace.", path="segment_id")
    return template, audience


async def resolve_sender(db: AsyncDatabase, workspace: Workspace, from_email: str | None,
                         from_name: str | None, reply_to: str | None, *, shared_domain: str) -> dict:
    """The stored sender of a campaign (or an automation's email), from the workspace's
    verified domains; the pipelines.messages.sender rules refuse an address it may not use."""
    sender = sender_rules.workspace_sender(
        workspace, from_email=from_email, from_name=from_name, reply_to=reply_to,
        shared_domain=shared_domain, domains=await domains.verified_map(db, workspace["_id"]))
    return {"from_address": sender.from_address, "from_name": sender.from_name,
            "reply_to": sender.reply_to, "signing_domain": sender.signing_domain,
            "custom_domain": sender.custom_domain}


async def start(db: AsyncDatabase, settings: Settings, publisher: Publisher, workspace: Workspace, campaign: Campaign,
                *, key_id: str | None, sandbox: bool) -> Campaign:
    """The campaign as it started sending; 404 for a reference gone, 403 limit_reached, 409
    when it is not startable or another request started it first."""
    if campaign["status"] not in campaign_fanout.STARTABLE:
        raise Conflict(f"The campaign is {campaign['status']}; only a draft or scheduled campaign can be sent.")
    workspace_id = workspace["_id"]
    template, audience = await check_references(db, workspace_id, campaign["template_id"],
                                                campaign["list_id"], campaign["segment_id"])
    sender = await resolve_sender(db, workspace, campaign["from_email"], campaign["from_name"],
                                  campaign["reply_to"], shared_domain=settings.shared_domain)
    started_at = now_iso()
    is_list = campaign["list_id"] is not None
    total = await campaign_audience.count_recipients(db, workspace_id, campaign_audience.audience_filter(
        audience, is_list, started_at))
    month = throttle.month_of(utcnow())
    if not sandbox:  # the counted audience counts against the plan now, or nothing is sent
        limit = throttle.monthly_limit(workspace, settings.plan_monthly_email_limit)
        if not await send_limits.charge_plan(db, workspace_id, month, total, limit):
            raise Forbidden(f"Sending to {total} recipients would pass the plan's limit of {limit} "
                            "emails this month.", code="limit_reached")
    started = await campaign_store.start_sending(db, workspace_id, campaign["_id"], {
        "audience": {"_id": audience["_id"], "conditions": audience.get("conditions"), "is_list": is_list},
        "audience_at": started_at, "audience_resolved": total == 0, "recipients_token": None,
        "sender": sender, "template_version": template["version"],
        "key_id": key_id, "sandbox": sandbox, "total_recipients": total,
        "batches_queued": campaign_fanout.batch_count(total), "batches_done": 0,
        "fanout_done": total == 0, "fanout_at": started_at, "revived_at": started_at})
    if started is None:  # another request started it first; its charge is the one used
        if not sandbox:
            await send_limits.refund_plan(db, workspace_id, month, total)
        raise Conflict("The campaign was started by another request; it is sent once.")
    await outbox.record(db, workspace_id, "campaign.sent",
                        {"campaign_id": campaign["_id"], "name": campaign["name"],
                         "total_recipients": total, "started_at": started["started_at"]},
                        event_id=f"{campaign['_id']}:campaign.sent")
    if not started["fanout_done"]:
        await publisher.fan_out(started["_id"], 0)
    return started
