"""Render a chunk of queued messages into personalised, signed MIME, and deliver it.

When this worker also serves the `send` queue (the default: every queue), the job claims
its messages first and delivers what renders itself (send_chunk.deliver): the MIME never
leaves the process. A worker that serves `render` alone (an operator's separate pools)
hands the MIME to the send step inside a `send` job instead, which claims and delivers
(not stored either way: see send_chunk.py). Only failures are written here; a message
that renders stays `queued` or `sending` (delivery_status has no `rendered`).

    claim the messages (or, handing off: load the still-queued ones); a cancelled
      campaign's are cancelled
    sandbox keys: a mock `delivered` at once (neither rendered nor sent)
    recipients suppressed since acceptance: taken out (`suppressed` if nobody is left)
    render the rest (`render`: off the event loop), failures end `failed`
    deliver what rendered, or publish send jobs for it"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from pymongo.asynchronous.database import AsyncDatabase

from mongo import (
    attachments,
    batches,
    campaign_audience,
    campaign_parts,
    campaigns,
    contacts,
    messages,
    suppressions,
    templates,
    workspaces,
)
from pipelines.audience import recipients
from pipelines.campaigns.fanout import campaign_message
from pipelines.core.clock import in_seconds, ms_of, now_iso, now_ms
from pipelines.core.documents import Campaign, CampaignPart
from pipelines.core.settings import SEND_LEASE_MARGIN_SECONDS, Settings
from pipelines.messages import delivery_status, mail_streams
from pipelines.messages.attachments import store_key
from pipelines.templates.render_message import RenderContext, RenderResult
from pipelines.workflows import pause_campaign
from pipelines.workflows.dkim_keys import signers_for
from pipelines.workflows.publisher import Publisher, PublishFailed
from pipelines.workflows.send_chunk import Claim, Sent, claim_messages, deliver

log = logging.getLogger("postroom.render")

SANDBOX_DETAIL = "sandbox key: not sent (mock result)"

# Renders messages off the event loop (actors/render_pool.render_off_loop).
Renderer = Callable[[list[dict], RenderContext], Awaitable[RenderResult]]


async def render_chunk(db: AsyncDatabase, settings: Settings, publisher: Publisher, render: Renderer,
                       message_ids: list[str], *, transport=None, claim_token: str = "",
                       born: Sequence[str] = ()) -> Sent | None:
    """`transport`: this worker's SMTP transport when it serves `send` too (the messages
    are claimed under `claim_token`, the job's, or held under the `born` claims it was
    published with, and delivered here; what the delivery did is returned), None to hand
    the MIME to send jobs (which carry the born claims on)."""
    claim = None
    if transport is not None:
        claim = await claim_messages(db, settings, message_ids, claim_token, whole=True, born=born)
        docs = claim.messages
    else:
        docs = [m for m in await messages.load(db, message_ids) if m["status"] == "queued"]
        docs = await campaigns.withhold_stopped(db, docs)  # a cancelled or paused campaign renders no more
    # suppressed since accepted (a scheduled email's wait, a campaign's queue): not sent
    return await _render_and_deliver(db, settings, publisher, render, docs, claim, transport, born,
                                     withhold=withhold_suppressed)


async def render_part(db: AsyncDatabase, settings: Settings, publisher: Publisher, render: Renderer,
                      part_id: str, token: str, *, transport=None) -> Sent | None:
    """A campaign part (mongo/campaign_parts.py), held under its born claim `token`: its
    recipients still to send to now, their messages made in memory and each stored once,
    as its outcome leaves it (messages.insert_moved) — sent, failed, suppressed, deferred
    for a retry (then an ordinary stored message), or cancelled with its campaign. A part
    run again (a redelivered job) skips the recipients already recorded, so only what was
    in flight when its worker died can go twice. A paused campaign's part is held
    (pause_campaign.py), and one whose campaign is paused or cancelled while it sends
    starts no new SMTP transaction and is held with the rest unrecorded. A worker without `transport` (a
    render-only pool) stores the messages under the part's claim and renders them as
    render_chunk does."""
    part = await campaign_parts.load(db, part_id)
    if part is None or part["done"] or part["lease_token"] != token:
        return None  # finished, or handed to another job once ours lapsed
    lease_end = await _part_lease(db, settings, part)
    campaign = await campaigns.load(db, part["campaign_id"])
    if lease_end is None or campaign is None:
        return None
    if campaign["status"] == "paused":  # held, its recipients unrecorded, until the resume
        await pause_campaign.hold_part(db, settings, publisher, part)
        return None
    sendable, docs = await _part_messages(db, campaign, part)
    claim = Claim(token, lease_end, docs, unstored=True)
    if campaign["status"] == "cancelled":
        await claim.record(db, [delivery_status.cancel(m["_id"], current="queued", detail=campaigns.CANCELLED)
                                for m in docs])
        sent = None
    elif transport is None:
        await messages.insert_new(db, docs)
        sent = await render_chunk(db, settings, publisher, render, [m["_id"] for m in docs], born=[token])
    else:
        people = {(campaign["workspace_id"], c["email"].lower()): c for c in sendable}
        async with pause_campaign.watch(db, campaign["_id"]) as stopped:
            sent = await _render_and_deliver(db, settings, publisher, render, docs, claim, transport, [token],
                                             contacts=people, halted=stopped)
        if stopped():  # paused or cancelled meanwhile: what did not start stays unrecorded
            await pause_campaign.hold_part(db, settings, publisher, part)
            return sent
    await _finish_part(db, campaign, part, len(sendable))
    return sent


async def unpack_part(db: AsyncDatabase, publisher: Publisher, part_id: str, token: str) -> None:
    """A part whose jobs kept dying (handed back POSTROOM_MESSAGE_MAX_REVIVALS times,
    ops/campaign_jobs.revive_lapsed_parts), held under `token`: its recipients' messages
    stored as ordinary unclaimed `queued` messages and their render published, so one
    recipient that breaks a job no longer holds back the other 99 — each is retried, and
    given up on, by the message watchdog on its own."""
    part = await campaign_parts.load(db, part_id)
    campaign = None if part is None else await campaigns.load(db, part["campaign_id"])
    if part is None or campaign is None or part["done"] or part["lease_token"] != token:
        return
    sendable, docs = await _part_messages(db, campaign, part)
    await messages.insert_new(db, [{**m, "lease_token": delivery_status.UNCLAIMED} for m in docs])
    await _finish_part(db, campaign, part, len(sendable))
    await publisher.render([m["_id"] for m in docs])


async def _part_messages(db: AsyncDatabase, campaign: Campaign, part: CampaignPart) -> tuple[list[dict], list[dict]]:
    """The part's contacts still to send to now, and the messages to make for them, held
    under the part's claim (those already recorded, by an earlier run, left out)."""
    at = now_iso()
    sendable = await campaign_audience.sendable_contacts(db, campaign["workspace_id"], part["contact_ids"])
    made = [{**campaign_message(campaign, contact, at), "lease_token": part["lease_token"],
             "lease_until": part["lease_until"]} for contact in sendable]
    recorded = {m["_id"] for m in await messages.load(db, [m["_id"] for m in made], {"_id": 1})}
    return sendable, [m for m in made if m["_id"] not in recorded]


async def _finish_part(db: AsyncDatabase, campaign: Campaign, part: CampaignPart, sendable: int) -> None:
    if await campaign_parts.finish(db, part["_id"], part["lease_token"]):
        # who was left out (gone, unsubscribed, bounced or suppressed since the audience
        # was resolved) is no longer counted as handed on: no message will be made
        await campaigns.bump_created(db, campaign["_id"], sendable - len(part["contact_ids"]))


async def _part_lease(db: AsyncDatabase, settings: Settings, part: CampaignPart) -> float | None:
    """When our claim on the part ends (monotonic, less a margin): as stored when at least
    half of it is left, else extended first; None when the part is no longer ours."""
    left = (ms_of(part["lease_until"]) - now_ms()) / 1000
    if left < settings.send_lease_seconds / 2:
        part["lease_until"] = in_seconds(settings.send_lease_seconds)
        if not await campaign_parts.extend(db, part["_id"], part["lease_token"], part["lease_until"]):
            return None
        left = settings.send_lease_seconds
    return time.monotonic() + left - SEND_LEASE_MARGIN_SECONDS


async def _render_and_deliver(db: AsyncDatabase, settings: Settings, publisher: Publisher, render: Renderer,
                              docs: list[dict], claim: Claim | None, transport, born: Sequence[str], *,
                              withhold=None, contacts: dict | None = None,
                              halted: Callable[[], bool] | None = None) -> Sent | None:
    """Render the held messages `docs` (`claim`: held for delivery here, else handed to
    send jobs) and deliver them. `withhold`: takes out recipients suppressed since they
    were accepted; `contacts`: the recipients' contacts, when the caller read them;
    `halted`: once it says so, no SMTP transaction starts (send_chunk.deliver)."""
    def record(transitions):
        return claim.record(db, transitions) if claim else messages.apply(db, transitions)
    sandbox = [m for m in docs if m.get("sandbox")]
    if sandbox:  # sandbox keys are neither rendered nor sent: a mock `delivered` outcome at once
        await record([delivery_status.forward(m["_id"], "delivered", {"smtp_response": "250 sandbox"},
                                              SANDBOX_DETAIL, via=("sent",)) for m in sandbox])
        await batches.record_finished(db, [(m, "delivered") for m in sandbox])
    real = [m for m in docs if not m.get("sandbox")]
    if withhold:
        real = await withhold(db, real)
    if not real:
        return None
    signers, return_paths = await signers_for(db, settings, real)
    result = await render(real, RenderContext(
        settings=settings, signers=signers, return_paths=return_paths, files=await files_of(db, real),
        **await personalisation_inputs(db, real, contacts)))
    await record([delivery_status.fail(mid, why) for mid, why in result.failed.items()])
    await batches.record_finished(db, [(m, "failed") for m in real if m["_id"] in result.failed])
    if not result.rendered:
        return None
    if claim is None:
        await _hand_to_send(db, publisher, result.rendered, born)
        return None
    mime = {r["_id"]: r for r in result.rendered}
    rendered = dataclasses.replace(claim, messages=[m for m in real if m["_id"] in mime])
    return await deliver(db, settings, publisher, transport, rendered, mime, halted=halted)


async def files_of(db: AsyncDatabase, docs: list[dict]) -> dict[str, bytes]:
    """The bytes of the messages' attachments, by attachments.store_key."""
    return await attachments.load(db, [store_key(m["workspace_id"], ref["sha256"])
                                       for m in docs for ref in m.get("attachments") or ()])


async def personalisation_inputs(db: AsyncDatabase, docs: list[dict], known: dict | None = None) -> dict:
    """What merge tags read: each workspace (company fields; as this process read it
    within mongo/recent.FRESH_SECONDS, as the front does), the template versions the
    messages were sent with, and the contact of each first recipient (if there is one;
    `known`: those contacts by (workspace id, lower-cased email), when the caller read
    them already)."""
    workspace_ids = {m["workspace_id"] for m in docs}
    found = {w: await workspaces.recent(db, w) for w in workspace_ids}
    versions = await templates.load_versions(db, list({(m["template_id"], m.get("template_version"))
                                                        for m in docs if m.get("template_id")}))
    people = known if known is not None else await _first_recipients(db, docs)
    return {"workspaces": {k: v for k, v in found.items() if v}, "templates": versions, "contacts": people}


async def _first_recipients(db: AsyncDatabase, docs: list[dict]) -> dict:
    people = {}
    wanted: dict[str, set[str]] = {}
    by_id: dict[str, set[str]] = {}  # campaign messages name their contact: a fast lookup by _id
    for m in docs:
        if m.get("contact_id"):
            by_id.setdefault(m["workspace_id"], set()).add(m["contact_id"])
        else:
            wanted.setdefault(m["workspace_id"], set()).add(recipients.first_recipient(m).lower())
    for workspace_id, ids in by_id.items():
        for contact in await campaign_audience.live_contacts_by_ids(db, workspace_id, list(ids)):
            people[(workspace_id, contact["email"].lower())] = contact
    for workspace_id, emails in wanted.items():
        for key, contact in (await contacts.find_by_emails(db, workspace_id, list(emails))).items():
            people[(workspace_id, key)] = contact
    return people


async def withhold_suppressed(db: AsyncDatabase, docs: list[dict]) -> list[dict]:
    """Recipients still owed the message who were suppressed since it was accepted (a
    bounce, complaint or unsubscribe while a scheduled email waited, or while campaign
    mail sat in the queue) are taken out as the API does at accept time
    (pipelines.audience.recipients.without_suppressed; which reasons count depends on the
    message's stream, pipelines.messages.mail_streams); a message left with nobody becomes
    `suppressed` (and counts as such in its batch). Returns the messages still to
    render. One suppression read per workspace, by `_id`."""
    wanted: dict[str, set[str]] = {}
    for d in docs:
        wanted.setdefault(d["workspace_id"], set()).update(recipients.owed_recipients(d))
    reasons = {ws: await suppressions.reasons_among(db, ws, list(emails)) for ws, emails in wanted.items()}
    if not any(reasons.values()):
        return docs
    keep, finished = [], []
    for d in docs:
        blocked = mail_streams.blocked_addresses(mail_streams.stream_of(d), reasons[d["workspace_id"]])
        split = recipients.without_suppressed(d, blocked)
        if split is None:
            keep.append(d)
            continue
        changes, nobody_left = split
        if not nobody_left:
            if await messages.trim_recipients(db, d, changes):
                keep.append({**d, **changes})
            continue
        gone = delivery_status.forward(d["_id"], "suppressed", changes,
                                       "every recipient was suppressed before sending", current=d["status"])
        if await messages.apply(db, [gone]):  # guarded: a redelivered render counts it once
            finished.append((d, "suppressed"))
    await batches.record_finished(db, finished)
    return keep


async def _hand_to_send(db: AsyncDatabase, publisher: Publisher, rendered: list[dict], born: Sequence[str]) -> None:
    """Send jobs for the rendered messages (bounded by count and bytes). What the broker
    does not take keeps the reason on the message (history and `last_error`); a refusal
    (the broker answered no) is not retried here — the watchdog renders the message
    again after POSTROOM_MESSAGE_STALL_SECONDS and, after POSTROOM_MESSAGE_MAX_REVIVALS
    tries, ends it `failed` with that reason; an unreachable broker is retried by Dramatiq."""
    try:
        await publisher.send(rendered, born=born)
    except PublishFailed as failed:
        why = (f"the broker refused its send job ({failed.reason})" if failed.refused
               else f"its send job could not be handed to the broker ({failed.reason})")
        await messages.note_handoff_failed(db, failed.unpublished, why, born)
        if not failed.refused:
            raise
        log.error("render: %s (%d message(s) left for the watchdog)", why, len(failed.unpublished))
