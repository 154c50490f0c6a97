"""A sending campaign's fan-out (the `campaigns` queue's jobs, one per batch; sending was
started by workflows/start_campaign.py, which only counted the audience).

The first job resolves the audience as of the start (`audience_at`) into numbered batches
and keeps them once (guarded: a job run twice, or alongside a re-enqueued one, keeps
one resolution and drops its own); the plan charged for the counted size gets back the
recipients resolved fewer (unsubscribed or suppressed since the count), or is charged
the few more. Then each job cuts its batch into parts (mongo/campaign_parts.py; stored
once: a batch that runs twice stores nothing new, and publishes only what it stored),
hands each part to a render job, saves the new cursor (guarded on the old one, counting
the batch's recipients as handed on), then hands on the next batch. The part's job
reads its contacts, leaves out who may no longer be sent to, and records each
recipient's message once, at its outcome. A worker killed anywhere in between leaves
the broker message unacked; RabbitMQ hands it to the next worker, which repeats the step harmlessly."""

from __future__ import annotations

import uuid

from pymongo.asynchronous.database import AsyncDatabase

from mongo import campaign_audience, campaign_parts, campaigns, send_limits
from pipelines.campaigns import fanout as campaign_fanout
from pipelines.core.clock import in_seconds, parse_iso
from pipelines.core.documents import Campaign
from pipelines.core.settings import Settings
from pipelines.messages import send_jobs, throttle
from pipelines.workflows.publisher import Publisher


def _runs(campaign: Campaign, batch: int) -> bool:
    return campaign["status"] == "sending" and not campaign["fanout_done"] and campaign["batches_done"] == batch


async def resolve_audience(db: AsyncDatabase, campaign: Campaign) -> Campaign | None:
    """The campaign once its audience is resolved (by this call or by another)."""
    audience = campaign["audience"]
    audience_filter = campaign_audience.audience_filter(audience, audience["is_list"], campaign["audience_at"])
    recipients = await campaign_audience.resolve_recipients(db, campaign["workspace_id"], audience_filter)
    token = uuid.uuid4().hex[:12]
    await campaign_audience.store_batches(db, campaign["_id"], token, recipients)
    total = len(recipients)
    if not await campaigns.record_audience(db, campaign["_id"], token, total, campaign_fanout.batch_count(total)):
        await campaign_audience.drop_batches(db, campaign["_id"], token)
    elif not campaign["sandbox"]:  # the plan was charged the counted size: settle the difference
        month = throttle.month_of(parse_iso(campaign["started_at"]))
        counted = campaign["total_recipients"]
        await send_limits.refund_plan(db, campaign["workspace_id"], month, counted - total)
        await send_limits.charge_plan(db, campaign["workspace_id"], month, total - counted, 0)
    return await campaigns.load(db, campaign["_id"])


async def fan_out(db: AsyncDatabase, settings: Settings, publisher: Publisher, campaign_id: str, batch: int) -> None:
    campaign = await campaigns.load(db, campaign_id)
    if campaign is not None and _runs(campaign, batch) and not campaign["audience_resolved"]:
        campaign = await resolve_audience(db, campaign)
    if campaign is None or not _runs(campaign, batch):
        return  # finished, cancelled, nobody to send to, or this batch was already done by someone else
    contact_ids = await campaign_audience.batch_contact_ids(db, campaign, batch)
    # parts stored claimed by their render jobs (one job a part, campaign_parts.py): no
    # message document yet, none claimed; each recipient is recorded once, at its outcome
    token = send_jobs.new_claim_token()
    lease_until = in_seconds(settings.send_lease_seconds)
    parts = [campaign_parts.new_part(campaign, batch, n, contact_ids[first:first + campaign_fanout.PART_SIZE],
                                     token, lease_until)
             for n, first in enumerate(range(0, len(contact_ids), campaign_fanout.PART_SIZE))]
    stored = await campaign_parts.insert_new(db, parts)
    await publisher.render_parts([p["_id"] for p in stored], token=token)
    done = batch + 1 >= campaign["batches_queued"]
    if await campaigns.advance_cursor(db, campaign_id, batch, created=len(contact_ids), done=done) and not done:
        await publisher.fan_out(campaign_id, batch + 1)
