"""A sending campaign's fan-out (the `campaigns` queue's jobs, one per batch; sending was
started by workflows/start_campaign.py, which only counted the audience).

The first job resolves the audience as of the start (`audience_at`) into numbered batches
and keeps them once (guarded: a job run twice, or alongside a re-enqueued one, keeps
one resolution and drops its own); the plan charged for the counted size gets back the
recipients resolved fewer (unsubscribed or suppressed since the count), or is charged
the few more. Then each job loads its batch's contacts, creates their messages
(deterministic `_id`s, so a batch that runs twice creates nothing new), hands them to
rendering, saves the new cursor (guarded on the old one), then hands on the next batch. A
worker killed anywhere in between leaves the broker message unacked; RabbitMQ hands it to
the next worker, which repeats the step harmlessly."""

from __future__ import annotations

import uuid

from pymongo.asynchronous.database import AsyncDatabase

from mongo import campaign_audience, campaigns, send_limits
from pipelines import campaign_fanout, delivery_status, send_jobs, throttle
from pipelines.campaign_fanout import campaign_message
from pipelines.clock import in_seconds, now_iso, parse_iso
from pipelines.settings import Settings
from pipelines.workflows.publisher import Publisher


def _runs(campaign: dict | None, batch: int) -> bool:
    return (campaign is not None and campaign["status"] == "sending" and not campaign["fanout_done"]
            and campaign["batches_done"] == batch)


async def resolve_audience(db: AsyncDatabase, campaign: dict) -> dict | None:
    """The campaign once its audience is resolved (by this call or by another)."""
    audience = campaign["audience"]
    recipients = await campaign_audience.resolve_recipients(db, campaign["workspace_id"], campaign_audience.audience_filter(
        audience, audience["is_list"], campaign["audience_at"]))
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
    # (a campaign started before the count at start came resolved its audience then)
    if _runs(campaign, batch) and not campaign.get("audience_resolved", True):
        campaign = await resolve_audience(db, campaign)
    if not _runs(campaign, batch):
        return  # finished, cancelled, nobody to send to, or this batch was already done by someone else
    recipients = await campaign_audience.batch_recipients(db, campaign, batch)
    # stored claimed by their render jobs (delivery_status.born_claim): no claim write each
    born = send_jobs.new_claim_token()
    claimed = delivery_status.born_claim(born, in_seconds(settings.send_lease_seconds))
    docs = [{**campaign_message(campaign, contact, now_iso()), **claimed} for contact in recipients]
    created = await campaigns.insert_messages(db, docs)
    ids = await campaigns.without_cancelled(db, campaign_id, [d["_id"] for d in docs], born)
    await publisher.render(ids, born=born)  # finer than a batch: several workers share it
    done = batch + 1 >= campaign["batches_queued"]
    if await campaigns.advance_cursor(db, campaign_id, batch, created=created, done=done) and not done:
        await publisher.fan_out(campaign_id, batch + 1)
