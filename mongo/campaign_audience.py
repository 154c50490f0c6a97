"""A campaign's audience, resolved at send time, and the start of sending.

The audience is the list's members or the segment's matching contacts, narrowed to
contacts that are subscribed, not bounced, not soft-deleted and created before the send
started, minus suppressed addresses. Contacts are one document per address, so walking
them in `_id` order reaches each address once, however many lists it is in.

The filter is frozen on the campaign when sending starts (as JSON: MongoDB refuses
`$`-keys inside stored documents), so every batch — and a worker restarted after a
crash — walks the same audience."""

from __future__ import annotations

import json

from pymongo.asynchronous.database import AsyncDatabase

from pipelines import campaign_fanout, sender as sender_rules
from pipelines.errors import NotFound
from pipelines.segment_rules import compile_conditions
from pipelines.settings import Settings

from . import campaigns as campaign_store
from . import contacts, domains, lists, outbox, segments, suppressions, templates


async def check_references(db: AsyncDatabase, workspace_id: str, template_id: str,
                           list_id: str | None, segment_id: str | None) -> tuple[dict, dict]:
    """The template and the list or segment, or 404 (template_not_found / not_found)."""
    template = await templates.get(db, workspace_id, template_id)
    if template is None:
        raise NotFound("No such template in this workspace.", code="template_not_found", path="template_id")
    if list_id is not None:
        audience = await lists.get(db, workspace_id, list_id)
        if audience is None:
            raise NotFound("No such list in this workspace.", path="list_id")
    else:
        audience = await segments.get(db, workspace_id, segment_id)
        if audience is None:
            raise NotFound("No such segment in this workspace.", path="segment_id")
    return template, audience


async def resolve_sender(db: AsyncDatabase, workspace: dict, from_email: str | None,
                         from_name: str | None, reply_to: str | None, *, shared_domain: str) -> dict:
    sender = sender_rules.resolve_sender(
        from_email=from_email, from_name=from_name, reply_to=reply_to,
        default_from_email=workspace.get("default_from_email"),
        shared_local_part=workspace.get("sending_local_part")
        or sender_rules.workspace_local_part(workspace["name"], workspace["_id"]),
        shared_domain=shared_domain, domains=await domains.verified_map(db, workspace["_id"]))
    return {"from_address": sender.from_address, "from_name": sender.from_name,
            "reply_to": sender.reply_to, "signing_domain": sender.signing_domain,
            "custom_domain": sender.custom_domain}


def audience_filter(list_or_segment: dict, is_list: bool, started_at: str) -> dict:
    if is_list and not list_or_segment.get("conditions"):
        selection = {"lists": list_or_segment["_id"]}
    else:
        selection = compile_conditions(list_or_segment["conditions"])
    return {"$and": [selection, {"subscribed": True}, {"bounced": False},
                     {"created_at": {"$lte": started_at}}]}


async def count_recipients(db: AsyncDatabase, workspace_id: str, mongo_filter: dict) -> int:
    """Audience size minus its suppressed addresses (suppression lists are short next
    to audiences, so the suppressed ones are counted by address inside the audience)."""
    total = await contacts.count(db, workspace_id, mongo_filter)
    suppressed = [d["email_key"] for d in await db.suppressions.find(
        {"workspace_id": workspace_id}, {"email_key": 1}).to_list()]
    if suppressed and total:
        total -= await contacts.count(
            db, workspace_id, {"$and": [mongo_filter, {"email_key": {"$in": suppressed}}]})
    return total


async def begin_sending(db: AsyncDatabase, workspace: dict, campaign: dict, *, key_id: str,
                        sandbox: bool, settings: Settings) -> dict | None:
    """Resolve template, audience and sender now, count the recipients, and move the
    campaign to `sending` (guarded: of two concurrent starts one wins; the other gets
    None). Emits campaign.sent; a campaign with nobody to send to is sent at once."""
    from pipelines.clock import now_iso
    workspace_id = workspace["_id"]
    template, audience = await check_references(db, workspace_id, campaign["template_id"],
                                         campaign["list_id"], campaign["segment_id"])
    sender = await resolve_sender(db, workspace, campaign["from_email"], campaign["from_name"],
                                  campaign["reply_to"], shared_domain=settings.shared_domain)
    started_at = now_iso()
    mongo_filter = audience_filter(audience, campaign["list_id"] is not None, started_at)
    total = await count_recipients(db, workspace_id, mongo_filter)
    started = await campaign_store.start_sending(db, workspace_id, campaign["_id"], {
        "audience_filter": json.dumps(mongo_filter), "sender": sender,
        "template_version": template["version"], "key_id": key_id,
        "sandbox": sandbox, "total_recipients": total,
        "batches_queued": campaign_fanout.batch_count(total),
        "last_contact_id": campaign_store.CURSOR_START, "fanout_done": total == 0,
        "fanout_at": started_at, "revived_at": started_at})
    if started is None:
        return None
    await outbox.record(db, workspace_id, "campaign.sent",
                        {"campaign_id": campaign["_id"], "name": campaign["name"],
                         "total_recipients": total, "started_at": started["started_at"]},
                        event_id=f"{campaign['_id']}:campaign.sent")
    return started


async def next_batch(db: AsyncDatabase, campaign: dict, batch_size: int) -> tuple[list[dict], str, bool]:
    """The next contacts after the campaign's cursor: (recipients not suppressed, the new
    cursor, whether this was the last batch)."""
    mongo_filter = json.loads(campaign["audience_filter"])
    page = await contacts.audience_page(db, campaign["workspace_id"], mongo_filter,
                                        campaign["last_contact_id"] or None, batch_size)
    if not page:
        return [], campaign["last_contact_id"], True
    suppressed = await suppressions.suppressed_among(db, campaign["workspace_id"], [c["email"] for c in page])
    recipients = [c for c in page if c["email"] not in suppressed]
    return recipients, page[-1]["_id"], len(page) < batch_size
