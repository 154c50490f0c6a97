"""The `campaigns` queue: a sending campaign fanned out into recipient batches.

One broker message is one batch (numbered; the audience was cut into batches when sending
started): load its contacts, create the batch's messages (deterministic `_id`s, so a batch that runs twice creates nothing new),
enqueue their rendering, save the new cursor (guarded on the old one), then enqueue the
next batch. A worker killed anywhere in between leaves the broker message unacked;
RabbitMQ hands it to the next worker, which repeats the batch harmlessly."""

from __future__ import annotations

import dramatiq

from mongo import campaign_audience, campaigns
from pipelines.campaign_fanout import campaign_message
from pipelines.clock import now_iso

from . import runtime
from .publish import publish

# Render work is split finer than a batch so several workers share one batch.
RENDER_CHUNK = 100


@dramatiq.actor(queue_name="campaigns", max_retries=20, min_backoff=1000, max_backoff=30_000)
async def fan_out_campaign(campaign_id: str, batch: int) -> None:
    db = runtime.store()
    campaign = await campaigns.load(db, campaign_id)
    if (campaign is None or campaign["status"] != "sending" or campaign["fanout_done"]
            or campaign["batches_done"] != batch):
        return  # finished, cancelled, or this batch was already done by someone else
    recipients = await campaign_audience.batch_recipients(db, campaign, batch)
    docs = [campaign_message(campaign, contact, now_iso()) for contact in recipients]
    created = await campaigns.insert_messages(db, docs)
    ids = await campaigns.without_cancelled(db, campaign_id, [d["_id"] for d in docs])
    from .render import render_messages
    for start in range(0, len(ids), RENDER_CHUNK):
        await publish(render_messages, ids[start:start + RENDER_CHUNK])
    done = batch + 1 >= campaign["batches_queued"]
    if await campaigns.advance_cursor(db, campaign_id, batch, created=created, done=done) and not done:
        await publish(fan_out_campaign, campaign_id, batch + 1)


@dramatiq.actor(queue_name="campaigns", max_retries=10, min_backoff=1000, max_backoff=30_000)
async def cancel_campaign_messages(campaign_id: str) -> None:
    """After a cancel: every message not yet handed to SMTP becomes `cancelled`."""
    db = runtime.store()
    await campaigns.cancel_unsent(db, campaign_id)
    await campaigns.refresh_status_counts(db, campaign_id)
