"""Pause and resume a sending campaign (POST /campaigns/:id/pause and /resume, the
console's buttons; not in the spec: issue #37 asks for them, docs/campaigns.md).

A pause stops everything of the campaign that has not reached SMTP and keeps it, without
failing or cancelling anything:

    the fan-out stops at its saved position (a batch runs only while `sending`)
    a part whose job finds the campaign paused is held (campaign_parts.hold): no job,
      its recipients unrecorded (no message yet, so nothing `queued` to time out)
    a part's job in the middle of its recipients starts no new SMTP transaction once it
      sees the pause (`watch`); what it had in flight is recorded, the rest stays
      unrecorded and the part is held
    a stored message (an SMTP retry, a throttle hold, a render-only pool's) that comes to
      the render or send step is parked (delivery_status.park): queued, unclaimed, no
      time the scheduler ranges over

A resume hands the held parts to new jobs the way the scheduler revives a part whose job
was lost (`hand_on`, campaign_upkeep.revive_lapsed_parts), makes the parked messages due
(the scheduler's due-retry pass renders them) and puts the fan-out back in its queue.
A part run again sends only to its recipients with no message recorded yet, so every
recipient is sent once. The campaign keeps `release_due_ms` until the scheduler has
repeated that release a while later (campaign_upkeep.release_due_parts): a front that died
between the resume and the release, or a job that parked or held something just as the
resume came, leaves nothing behind. A cancel releases held parts the same way, so their
jobs record their recipients cancelled."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from mongo import campaign_parts, campaigns
from pipelines.core.clock import in_seconds
from pipelines.core.documents import Campaign, CampaignPart
from pipelines.core.errors import Conflict
from pipelines.core.settings import Settings
from pipelines.messages import send_jobs
from pipelines.workflows.publisher import Publisher

# How often a part's job sending its recipients reads its campaign's status, seconds: a
# pause starts no SMTP transaction of the campaign later than this.
WATCH_SECONDS = 0.25
# Statuses a part's job stops for: nothing more of the campaign leaves.
STOPPED = ("paused", "cancelled")


async def pause(db: AsyncDatabase, campaign: Campaign) -> Campaign:
    """The campaign as paused (at once if it already was); 409 unless it was sending."""
    if campaign["status"] == "paused":
        return campaign
    paused = await campaigns.pause(db, campaign["workspace_id"], campaign["_id"])
    if paused is None:
        now = await campaigns.load(db, campaign["_id"])
        if now is not None and now["status"] == "paused":  # another pause won
            return now
        status = now["status"] if now else campaign["status"]
        raise Conflict(f"The campaign is {status}; only a sending campaign can be paused.")
    return paused


async def resume(db: AsyncDatabase, settings: Settings, publisher: Publisher, campaign: Campaign) -> Campaign:
    """The campaign sending again, its held parts and parked messages handed on and its
    fan-out back in its queue; 409 unless it was paused."""
    resumed = await campaigns.resume(db, campaign["workspace_id"], campaign["_id"])
    if resumed is None:
        raise Conflict(f"The campaign is {campaign['status']}; only a paused campaign can be resumed.")
    await release(db, settings, publisher, resumed)
    if not resumed["fanout_done"]:
        await campaigns.touch_fanout(db, resumed["_id"])
        await publisher.fan_out(resumed["_id"], resumed["batches_done"])
    return resumed


async def release(db: AsyncDatabase, settings: Settings, publisher: Publisher, campaign: Campaign) -> int:
    """A resumed or cancelled campaign's held parts, each to a new job (which sends its
    unrecorded recipients, or records them cancelled); a resumed one's parked messages
    made due, a cancelled one's cancelled. Repeatable. How many parts went on."""
    handed = await hand_on(db, settings, publisher, await campaign_parts.held(db, campaign["_id"]), revival=False)
    status = await campaigns.status_of(db, campaign["_id"])
    if status == "sending":
        await campaigns.unpark(db, campaign["_id"])
    elif status == "cancelled":
        await campaigns.cancel_unsent(db, campaign["_id"])
    return len(handed)


async def hand_on(db: AsyncDatabase, settings: Settings, publisher: Publisher, parts: Sequence[Mapping[str, Any]],
                  *, revival: bool = True) -> list[Mapping[str, Any]]:
    """Open parts with no live job (lost, or held by a pause) each claimed under a new
    token (guarded on the old: a job still holding it, should it run, finds the part no
    longer its own) and given a render job. `revival`: counted as a lost job's. The parts
    handed on."""
    if not parts:
        return []
    token = send_jobs.new_claim_token()
    lease_until = in_seconds(settings.send_lease_seconds)
    taken = [p for p in parts if await campaign_parts.take_over(db, p, token, lease_until, revival=revival)]
    if taken:
        await publisher.render_parts([p["_id"] for p in taken], token=token)
    return taken


async def hold_part(db: AsyncDatabase, settings: Settings, publisher: Publisher, part: CampaignPart) -> None:
    """Our part (its job found the campaign paused, or stopped for a pause or cancel in the
    middle of it) held; then the status read again: a resume or cancel that came in
    between found the part not held yet and left it to us, so we hand it on."""
    if not await campaign_parts.hold(db, part["_id"], part["lease_token"]):
        return
    if await campaigns.status_of(db, part["campaign_id"]) != "paused":
        await hand_on(db, settings, publisher, [part], revival=False)


class Watch:
    """Whether the campaign stopped (paused or cancelled) while a part's job sends it."""

    def __init__(self) -> None:
        self.seen = False

    def stopped(self) -> bool:
        return self.seen


@contextlib.asynccontextmanager
async def watch(db: AsyncDatabase, campaign_id: str) -> AsyncIterator[Callable[[], bool]]:
    """For a part's job while it sends: a function telling whether its campaign stopped
    (read every WATCH_SECONDS in the background); the transport starts no transaction
    once it says so."""
    seen = Watch()

    async def look() -> None:
        while not seen.seen:
            await asyncio.sleep(WATCH_SECONDS)
            with contextlib.suppress(Exception):  # a store hiccup: look again next time
                seen.seen = await campaigns.status_of(db, campaign_id) in STOPPED

    task = asyncio.create_task(look())
    try:
        yield seen.stopped
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
