"""A campaign's audience, resolved at send time, and the start of sending.

The audience is the list's members or the segment's matching contacts, narrowed to
contacts that are subscribed, not bounced, not soft-deleted and created before the send
started, minus suppressed addresses. Contacts are one document per address, so walking
them in `_id` order reaches each address once, however many lists it is in.

When sending starts, the audience is resolved once into a list of contact ids, sorted
and cut into numbered batches stored in `campaign_recipients` (`_id` =
"<campaign>:<start token>:<batch number>", plain string arrays). A batch then loads
its contacts by `_id` (fast on MongoDB and on the embedded store, which cannot page a
filtered, sorted audience without reading all of it), so every batch — and a worker
restarted after a crash — sends to exactly the audience resolved at send time. At each
batch a contact that unsubscribed, bounced, was deleted or suppressed since is skipped."""

from __future__ import annotations

import re
import uuid

from pymongo.asynchronous.database import AsyncDatabase

from pipelines import campaign_fanout, sender as sender_rules, throttle
from pipelines.clock import utcnow
from pipelines.errors import Forbidden, NotFound
from pipelines.segment_rules import compile_conditions
from pipelines.settings import Settings

from . import campaigns as campaign_store
from . import contacts, domains, lists, outbox, segments, send_limits, suppressions, templates


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


async def resolve_recipients(db: AsyncDatabase, workspace_id: str, mongo_filter: dict) -> list[str]:
    """The ids of the contacts to send to, in `_id` order, suppressed addresses left out."""
    docs = await db.contacts.find(contacts.live(workspace_id, {"subscribed": True, "bounced": False}, mongo_filter),
                                  {"_id": 1, "email_key": 1}).to_list()
    suppressed = {d["email_key"] for d in await db.suppressions.find(
        {"workspace_id": workspace_id}, {"email_key": 1}).to_list()}
    return sorted(d["_id"] for d in docs if d["email_key"] not in suppressed)


def _chunk_id(campaign_id: str, token: str, batch: int) -> str:
    return f"{campaign_id}:{token}:{batch:06d}"


async def store_batches(db: AsyncDatabase, campaign_id: str, token: str, contact_ids: list[str]) -> None:
    size = campaign_fanout.BATCH_SIZE
    docs = [{"_id": _chunk_id(campaign_id, token, n), "campaign_id": campaign_id, "batch": n,
             "contact_ids": contact_ids[start:start + size]}
            for n, start in enumerate(range(0, len(contact_ids), size))]
    for first in range(0, len(docs), 100):
        await db.campaign_recipients.insert_many(docs[first:first + 100])


async def drop_batches(db: AsyncDatabase, campaign_id: str, token: str) -> None:
    await db.campaign_recipients.delete_many({"campaign_id": campaign_id,
                                              "_id": {"$regex": f"^{re.escape(campaign_id)}:{token}:"}})


async def begin_sending(db: AsyncDatabase, workspace: dict, campaign: dict, *, key_id: str,
                        sandbox: bool, settings: Settings) -> dict | None:
    """Resolve template, audience and sender now, count the recipients, charge them to the
    workspace's monthly plan (403 limit_reached past it, nothing sent; sandbox campaigns
    count nothing), and move the campaign to `sending` (guarded: of two concurrent starts
    one wins; the other gets None and its charge back). Emits campaign.sent; a campaign
    with nobody to send to is sent at once."""
    from pipelines.clock import now_iso
    workspace_id = workspace["_id"]
    template, audience = await check_references(db, workspace_id, campaign["template_id"],
                                         campaign["list_id"], campaign["segment_id"])
    sender = await resolve_sender(db, workspace, campaign["from_email"], campaign["from_name"],
                                  campaign["reply_to"], shared_domain=settings.shared_domain)
    started_at = now_iso()
    mongo_filter = audience_filter(audience, campaign["list_id"] is not None, started_at)
    recipients = await resolve_recipients(db, workspace_id, mongo_filter)
    token = uuid.uuid4().hex[:12]
    await store_batches(db, campaign["_id"], token, recipients)
    total = len(recipients)
    month = throttle.month_of(utcnow())
    if not sandbox:  # the whole audience counts against the plan now, or nothing is sent
        limit = throttle.monthly_limit(workspace, settings.plan_monthly_email_limit)
        if not await send_limits.charge_plan(db, workspace_id, month, total, limit):
            await drop_batches(db, campaign["_id"], token)
            raise Forbidden(f"Sending to {total} recipients would pass the plan's limit of {limit} "
                            "emails this month.", code="limit_reached")
    started = await campaign_store.start_sending(db, workspace_id, campaign["_id"], {
        "recipients_token": token, "sender": sender, "template_version": template["version"],
        "key_id": key_id, "sandbox": sandbox, "total_recipients": total,
        "batches_queued": campaign_fanout.batch_count(total), "batches_done": 0,
        "fanout_done": total == 0, "fanout_at": started_at, "revived_at": started_at})
    if started is None:  # another request started it first; its batches (and charge) are the ones used
        await drop_batches(db, campaign["_id"], token)
        if not sandbox:
            await send_limits.refund_plan(db, workspace_id, month, total)
        return None
    await outbox.record(db, workspace_id, "campaign.sent",
                        {"campaign_id": campaign["_id"], "name": campaign["name"],
                         "total_recipients": total, "started_at": started["started_at"]},
                        event_id=f"{campaign['_id']}:campaign.sent")
    return started


async def live_contacts_by_ids(db: AsyncDatabase, workspace_id: str, contact_ids: list[str]) -> list[dict]:
    """Live contacts of the workspace among `contact_ids`. Looked up by `_id` alone and
    checked here: with more conditions the embedded store reads the whole collection."""
    found = await db.contacts.find({"_id": {"$in": list(contact_ids)}}).to_list()
    return [c for c in found if c["workspace_id"] == workspace_id and not c["deleted"]]


async def batch_recipients(db: AsyncDatabase, campaign: dict, batch: int) -> list[dict]:
    """The contacts of batch number `batch` still to send to now."""
    chunk = await db.campaign_recipients.find_one(
        {"_id": _chunk_id(campaign["_id"], campaign["recipients_token"], batch)})
    if chunk is None:
        return []
    workspace_id = campaign["workspace_id"]
    found = [c for c in await live_contacts_by_ids(db, workspace_id, chunk["contact_ids"])
             if c["subscribed"] and not c["bounced"]]
    suppressed = await suppressions.suppressed_among(db, workspace_id, [c["email"] for c in found])
    return sorted((c for c in found if c["email"] not in suppressed), key=lambda c: c["_id"])
