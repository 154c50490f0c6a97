"""What the scheduler does for campaigns each pass (ops/campaign_jobs.py): start scheduled
ones when due, finish sending ones when every message is final (emitting
campaign.completed), keep stats snapshots fresh, revive a fan-out whose broker message was
lost and parts whose job was lost (and, a while after a resume or cancel, the parts a
pause held: pause_campaign.py), and give a cancelled campaign's unsent recipients back
to the plan. (Messages whose render or send job was lost are revived for every kind of
message by the watchdog, pipelines/workflows/message_watchdog.py.)"""

from __future__ import annotations

import logging

from pymongo.asynchronous.database import AsyncDatabase

from mongo import campaign_parts, campaigns, outbox, send_limits, workspaces
from pipelines.core.clock import in_seconds, ms_in, parse_iso
from pipelines.core.documents import Campaign
from pipelines.core.errors import PostroomError
from pipelines.core.settings import Settings
from pipelines.messages import send_jobs, throttle
from pipelines.workflows import pause_campaign, render_chunk, start_campaign
from pipelines.workflows.publisher import Publisher

log = logging.getLogger("postroom.scheduler")

STATS_REFRESH_SECONDS = 2.0
# A fan-out that has not advanced for this long gets its next batch enqueued again
# (harmless if the first is merely slow: a batch is guarded on the cursor it started from).
FANOUT_STALL_SECONDS = 120
# Bounces and complaints arrive after a campaign finishes; its stats follow them this long.
LATE_STATS_WINDOW_SECONDS = 24 * 3600


async def start_due_campaigns(db: AsyncDatabase, settings: Settings, publisher: Publisher) -> int:
    """Scheduled campaigns whose `send_at` has come, started; one that can no longer start
    (template, list or sender gone since it was scheduled) fails with the reason."""
    started = 0
    for campaign in await campaigns.due_scheduled(db):
        try:
            await _start(db, settings, publisher, campaign)
        except PostroomError as error:
            # (When another start won, the campaign is no longer startable and `fail` changes nothing.)
            await campaigns.fail(db, campaign["_id"], error.message)
            continue
        started += 1
    return started


async def _start(db: AsyncDatabase, settings: Settings, publisher: Publisher, campaign: Campaign) -> None:
    workspace = await workspaces.get(db, campaign["workspace_id"])
    if workspace is None:
        raise PostroomError("The workspace no longer exists.")
    await start_campaign.start(db, settings, publisher, workspace, campaign, key_id=campaign["key_id"],
                               sandbox=bool(campaign.get("sandbox")))


def _stale(timestamp: str | None, seconds: float) -> bool:
    return timestamp is None or timestamp < in_seconds(-seconds)


async def finish_campaigns(db: AsyncDatabase, publisher: Publisher) -> int:
    """Each sending campaign: a stalled fan-out nudged, a campaign whose messages are all
    final completed, the others' stats refreshed when stale (a paused one's too). How
    many completed."""
    finished = 0
    for campaign in await campaigns.sending(db):
        if campaign["status"] == "paused":  # what it had in flight still lands: only its stats follow
            if _stale(campaign.get("stats_at"), STATS_REFRESH_SECONDS):
                await campaigns.refresh_status_counts(db, campaign["_id"])
            continue
        if not campaign["fanout_done"]:
            await _nudge_stalled_fanout(db, publisher, campaign)
        elif not await campaigns.has_pending_messages(db, campaign["_id"]):
            finished += await _complete(db, campaign)
            continue
        if _stale(campaign.get("stats_at"), STATS_REFRESH_SECONDS):
            await campaigns.refresh_status_counts(db, campaign["_id"])
    return finished


async def _nudge_stalled_fanout(db: AsyncDatabase, publisher: Publisher, campaign: Campaign) -> None:
    if _stale(campaign.get("fanout_at"), FANOUT_STALL_SECONDS):
        log.warning("campaign %s fan-out stalled; enqueueing its next batch again", campaign["_id"],
                    extra={"campaign_id": campaign["_id"], "workspace_id": campaign.get("workspace_id")})
        await campaigns.touch_fanout(db, campaign["_id"])
        await publisher.fan_out(campaign["_id"], campaign["batches_done"])


async def _complete(db: AsyncDatabase, campaign: Campaign) -> int:
    """The campaign's final counts, `completed` (guarded: once), campaign.completed recorded.
    1 if this call completed it."""
    await campaigns.refresh_status_counts(db, campaign["_id"])
    done = await campaigns.complete(db, campaign["_id"])
    if done is None:
        return 0
    await outbox.record(db, done["workspace_id"], "campaign.completed",
                        {"campaign_id": done["_id"], "name": done["name"],
                         "total_recipients": done["total_recipients"], "completed_at": done["completed_at"]},
                        event_id=f"{done['_id']}:campaign.completed")
    return 1


async def revive_lapsed_parts(db: AsyncDatabase, settings: Settings, publisher: Publisher) -> int:
    """Campaign parts (mongo/campaign_parts.py) whose job's lease ran out undone (its
    worker died and its broker message is gone, or it was never published): each goes to
    a new job under a new claim (pause_campaign.hand_on, as a resume hands on the parts a
    pause held). A job still holding the old claim, if it ever runs, finds the part no
    longer its own; recipients recorded already are not sent again.
    A part handed back POSTROOM_MESSAGE_MAX_REVIVALS times is stored as single messages
    (render_chunk.unpack_part), which the message watchdog then sees to one by one.
    Then the parts held by a pause of campaigns resumed or cancelled a while ago are
    handed on again (release_due_parts)."""
    revived = 0
    again: list[dict] = []
    for part in await campaign_parts.lapsed(db):
        about = {"campaign_id": part["campaign_id"], "workspace_id": part.get("workspace_id")}
        if int(part.get("revivals") or 0) >= settings.message_max_revivals:
            token = send_jobs.new_claim_token()
            if not await campaign_parts.take_over(db, part, token, in_seconds(settings.send_lease_seconds)):
                continue
            log.error("campaign part %s handed back %d times; its recipients go on as single messages",
                      part["_id"], settings.message_max_revivals, extra=about)
            await render_chunk.unpack_part(db, publisher, part["_id"], token)
            revived += 1
        else:
            log.warning("campaign part %s was not finished within its lease; rendering it again", part["_id"],
                        extra=about)
            again.append(part)
    revived += len(await pause_campaign.hand_on(db, settings, publisher, again))
    await release_due_parts(db, settings, publisher)
    return revived


# A resume (or cancel) hands on the parts its campaign's pause held at once; this long
# after it, the scheduler does it again, then forgets it: a front that died in between,
# or a job that held a part or parked a message just as the resume came, leaves nothing
# behind.
RELEASE_AGAIN_SECONDS = 30


async def release_due_parts(db: AsyncDatabase, settings: Settings, publisher: Publisher) -> int:
    """Campaigns resumed or cancelled RELEASE_AGAIN_SECONDS ago or more: their held parts
    and parked messages released again (pause_campaign.release), then the release done."""
    released = 0
    for due in await campaigns.releases_due(db, ms_in(-RELEASE_AGAIN_SECONDS)):
        campaign = await campaigns.load(db, due["_id"])
        if campaign is not None:
            released += await pause_campaign.release(db, settings, publisher, campaign)
        await campaigns.parts_released(db, due["_id"], due["release_due_ms"])
    return released


async def refresh_finished_stats(db: AsyncDatabase) -> int:
    """Stats of campaigns finished in the last LATE_STATS_WINDOW_SECONDS, refreshed now and
    then: bounces and complaints still arrive."""
    refreshed = 0
    for campaign in await campaigns.recently_finished(db, ms_in(-LATE_STATS_WINDOW_SECONDS)):
        if _stale(campaign.get("stats_at"), STATS_REFRESH_SECONDS * 15):
            await campaigns.refresh_status_counts(db, campaign["_id"])
            refreshed += 1
    return refreshed


async def refund_cancelled_campaigns(db: AsyncDatabase) -> int:
    """A cancelled campaign was charged its whole audience when it started; once nothing of
    it is queued or on the wire, what never left — recipients never fanned out, and
    messages cancelled — goes back to the month it was charged to. (Recipients skipped for
    other reasons, suppressed or failed, stay counted, as for any campaign.)"""
    refunded = 0
    for campaign in await campaigns.refunds_due(db):
        if await campaigns.has_pending_messages(db, campaign["_id"]):
            continue
        counts = await campaigns.refresh_status_counts(db, campaign["_id"])
        unsent = (campaign["total_recipients"] - int(campaign.get("messages_created") or 0)
                  + counts.get("cancelled", 0))
        if await campaigns.take_refund(db, campaign["_id"], unsent):  # flag first: never twice
            month = throttle.month_of(parse_iso(campaign["started_at"]))
            await send_limits.refund_plan(db, campaign["workspace_id"], month, unsent)
            refunded += 1
    return refunded
