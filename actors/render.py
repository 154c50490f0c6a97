"""The `render` queue: queued messages → personalised, signed MIME, handed to the `send`
actor inside its job (not stored: see actors/send.py). Only failures are written here."""

from __future__ import annotations

import logging

import dramatiq

from mongo import batches, campaign_audience, campaigns, contacts, messages, templates, workspaces
from pipelines.render_message import RenderContext

from . import runtime, signing
from .publish import describe, refused_by_broker

from .render_pool import render_off_loop

log = logging.getLogger("postroom.render")

SANDBOX_DETAIL = "sandbox key: not sent (mock result)"


async def personalisation_inputs(db, docs: list[dict]) -> dict:
    """What merge tags read: each workspace (company fields), the template versions the
    messages were sent with, and the contact of each first recipient (if there is one)."""
    workspace_ids = {m["workspace_id"] for m in docs}
    found = {w: await workspaces.get(db, w) for w in workspace_ids}
    versions = await templates.load_versions(db, list({(m["template_id"], m.get("template_version"))
                                                        for m in docs if m.get("template_id")}))
    people = {}
    wanted: dict[str, set[str]] = {}
    by_id: dict[str, set[str]] = {}  # campaign messages name their contact: a fast lookup by _id
    for m in docs:
        if m.get("contact_id"):
            by_id.setdefault(m["workspace_id"], set()).add(m["contact_id"])
        else:
            wanted.setdefault(m["workspace_id"], set()).add(m["to"][0].lower())
    for workspace_id, ids in by_id.items():
        for contact in await campaign_audience.live_contacts_by_ids(db, workspace_id, list(ids)):
            people[(workspace_id, contact["email"].lower())] = contact
    for workspace_id, emails in wanted.items():
        for key, contact in (await contacts.find_by_emails(db, workspace_id, list(emails))).items():
            people[(workspace_id, key)] = contact
    return {"workspaces": {k: v for k, v in found.items() if v}, "templates": versions, "contacts": people}


@dramatiq.actor(queue_name="render", max_retries=10, min_backoff=1000, max_backoff=60_000)
async def render_messages(message_ids: list[str]) -> None:
    db = runtime.store()
    docs = [m for m in await messages.load(db, message_ids) if m["status"] == "queued"]
    docs = await campaigns.withhold_cancelled(db, docs)  # a cancelled campaign renders no more
    sandbox = [m["_id"] for m in docs if m.get("sandbox")]
    if sandbox:  # sandbox keys are neither rendered nor sent: a mock `delivered` outcome at once
        await messages.advance(db, [(mid, "delivered", {"smtp_response": "250 sandbox"}, SANDBOX_DETAIL,
                                     ("sent",)) for mid in sandbox])
        await batches.record_finished(db, [(m, "delivered") for m in docs if m.get("sandbox")])
    # suppressed since accepted (a scheduled email's wait, a campaign's queue): not sent
    real = await messages.withhold_suppressed(db, [m for m in docs if not m.get("sandbox")])
    if not real:
        return
    signers, return_paths = await signing.signers_for(db, runtime.settings(), real)
    result = await render_off_loop(real, RenderContext(
        settings=runtime.settings(), signers=signers, return_paths=return_paths,
        **await personalisation_inputs(db, real)))
    await messages.fail_many(db, result.failed)
    await batches.record_finished(db, [(m, "failed") for m in real if m["_id"] in result.failed])
    if result.rendered:
        await _hand_to_send(db, result.rendered)


async def _hand_to_send(db, rendered: list[dict]) -> None:
    """Send jobs for the rendered messages (bounded by count and bytes). What the broker
    does not take keeps the reason on the message (history and `last_error`); a refusal
    (the broker answered no) is not retried here — the watchdog renders the message
    again after POSTROOM_MESSAGE_STALL_SECONDS and, after POSTROOM_MESSAGE_MAX_REVIVALS
    tries, ends it `failed` with that reason; an unreachable broker is retried by Dramatiq."""
    from .send import HandoffFailed, publish_rendered
    try:
        await publish_rendered(rendered)
    except HandoffFailed as failed:
        refused = refused_by_broker(failed.cause)
        why = (f"the broker refused its send job ({describe(failed.cause)})" if refused
               else f"its send job could not be handed to the broker ({describe(failed.cause)})")
        await messages.note_handoff_failed(db, failed.unpublished, why)
        if not refused:
            raise
        log.error("render: %s (%d message(s) left for the watchdog)", why, len(failed.unpublished))
