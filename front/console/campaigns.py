"""Campaigns: the list, a campaign's progress (counts and a chart over time, watched live
by an opt-in page refresh) and its pause, resume and cancel buttons (the API's own
workflows)."""

from __future__ import annotations

from typing import get_args
from urllib.parse import urlencode

from pydantic import BaseModel, Field
from quart import redirect, request

from mongo import campaigns as campaign_store
from mongo.documents import cursor_of, cursor_position
from pipelines import views
from pipelines.campaigns import progress
from pipelines.campaigns.fanout import CANCELLABLE, PAUSABLE, RESUMABLE
from pipelines.core.clock import ms_of, now_ms

from ..routes.campaigns import CampaignStatus, cancel_owned, pause_owned, resume_owned, with_counts
from ..runtime import caller, db
from . import bp
from .charts import step_chart
from .forms import PAGE_ROWS, filters, shown_filters
from .guard import page, render

# The chart reads at most this many of a campaign's messages (a larger campaign's chart
# says it shows its first ones): one indexed read that stays inside a page's time budget.
CHART_MESSAGES = 2_000
# A watched page (opt-in, ?watch=1) loads itself again this often while the campaign runs.
WATCH_SECONDS = 5
# A campaign can be watched until it is done: before it starts, while it sends or is paused.
RUNNING = ("draft", "scheduled", "sending", "paused")
# What the page says after a button (`?done=`), as a status message.
DONE = {"cancelled": "The campaign was cancelled: nothing more of it is sent.",
        "paused": "The campaign was paused: nothing more of it is sent until it is resumed "
                  "(messages already handed to the mail server still arrive).",
        "resumed": "The campaign was resumed: its remaining recipients are being sent to."}


class CampaignFilter(BaseModel):
    status: CampaignStatus | None = None
    after: str | None = Field(None, max_length=200, description="The last row shown (documents.cursor_of).")


@page(bp, "/campaigns", area="campaigns")
async def campaigns():
    params = filters(CampaignFilter)
    docs = await campaign_store.newest(db(), caller().workspace_id, params.status, cursor_position(params.after),
                                       PAGE_ROWS + 1)
    given = shown_filters("status")
    more = len(docs) > PAGE_ROWS
    return await render("campaigns.html", title="Campaigns", rows=[views.campaign(d) for d in docs[:PAGE_ROWS]],
                        given=given, statuses=get_args(CampaignStatus),
                        next_page=f"?{urlencode({**given, 'after': cursor_of(docs[PAGE_ROWS - 1])})}" if more else None)


def _until_ms(campaign: dict) -> int:
    ended = campaign.get("completed_at") or campaign.get("cancelled_at")
    return ms_of(ended) if ended else now_ms()


@page(bp, "/campaigns/<uuid:campaign_id>", area="campaigns")
async def campaign(campaign_id: str):
    doc = await with_counts(campaign_id)
    shown = views.campaign(doc)
    started = doc.get("started_at") or doc["created_at"]
    histories = await campaign_store.message_histories(db(), doc["workspace_id"], doc["_id"], CHART_MESSAGES)
    found = progress.progress(histories,
                              ms_of(started), _until_ms(doc))
    chart = step_chart(found.series, found.start_ms, found.end_ms, shown["total_recipients"])
    watching = request.args.get("watch") == "1" and doc["status"] in RUNNING
    return await render("campaign.html", title=f"Campaign {shown['name']}", campaign=shown, chart=chart,
                        progress=found, capped=found.messages >= CHART_MESSAGES, series=progress.SERIES,
                        cancellable=doc["status"] in CANCELLABLE, pausable=doc["status"] in PAUSABLE,
                        resumable=doc["status"] in RESUMABLE, running=doc["status"] in RUNNING,
                        watching=watching, watch_seconds=WATCH_SECONDS, done=DONE.get(request.args.get("done", "")))


@page(bp, "/campaigns/<uuid:campaign_id>/cancel", area="campaigns", methods=("POST",))
async def cancel(campaign_id: str):
    await cancel_owned(campaign_id)
    return redirect(f"/console/campaigns/{campaign_id}?done=cancelled", 303)


@page(bp, "/campaigns/<uuid:campaign_id>/pause", area="campaigns", methods=("POST",))
async def pause(campaign_id: str):
    await pause_owned(campaign_id)
    return redirect(f"/console/campaigns/{campaign_id}?done=paused", 303)


@page(bp, "/campaigns/<uuid:campaign_id>/resume", area="campaigns", methods=("POST",))
async def resume(campaign_id: str):
    await resume_owned(campaign_id)
    return redirect(f"/console/campaigns/{campaign_id}?done=resumed", 303)
