"""From a validated send request to the message document the pipeline works on. Shared
by single sends and batch items so both obey the same rules."""

from __future__ import annotations

import datetime as dt

from pymongo.errors import PyMongoError

from mongo import batches as batch_store
from mongo import domains as domain_store
from mongo import messages as message_store
from mongo import send_limits
from mongo import suppressions as suppression_store
from mongo import templates as template_store
from pipelines import recipients
from pipelines import sender as sender_rules
from pipelines import throttle
from pipelines.clock import iso, now_iso, parse_iso, utcnow
from pipelines.errors import (Forbidden, InvalidSchedule, NoContent, NotFound, PostroomError, ServerError,
                             ValidationFailed)
from pipelines.ids import new_batch_id, new_message_id
from pipelines.personalise import check_merge_tags
from pipelines.text import clean_subject

from .enqueue import enqueue
from .runtime import Caller, db, settings

MAX_SCHEDULE_AHEAD = dt.timedelta(hours=72)


async def load_template(fields: dict, workspace_id: str, path_prefix: str, cache: dict | None) -> dict | None:
    """The live template a send names (404 template_not_found if unknown, deleted or another
    workspace's); `cache` lets a batch look each template up once."""
    template_id = fields.get("template_id")
    if not template_id:
        return None
    if fields.get("html") is not None:
        raise ValidationFailed("Give either html or template_id, not both.", path=f"{path_prefix}html")
    cache = {} if cache is None else cache
    if template_id not in cache:
        cache[template_id] = await template_store.get(db(), workspace_id, template_id)
    if cache[template_id] is None:
        raise NotFound("No template with this id in the workspace.", code="template_not_found",
                       path=f"{path_prefix}template_id")
    return cache[template_id]


async def build_message(fields: dict, who: Caller, *, path_prefix: str = "",
                        suppressed: set[str] | None = None, domains: dict[str, bool] | None = None,
                        templates: dict | None = None) -> dict:
    """`suppressed` / `domains` / `templates`: the suppressed addresses among the recipients,
    the workspace's sending domains and the templates named so far when the caller already
    looked them up in bulk (batch sends); otherwise they are looked up here."""
    if not any(fields.get(k) for k in ("html", "text", "template_id")):
        raise NoContent("One of html, text or template_id is required.", path=path_prefix.rstrip(".") or None)
    html = fields.get("html")
    if html is not None and len(html.encode()) > settings().max_html_bytes:
        raise ValidationFailed(f"html is larger than {settings().max_html_bytes // 1024} KB.",
                               path=f"{path_prefix}html")
    workspace = who.workspace
    template = await load_template(fields, workspace["_id"], path_prefix, templates)
    # Malformed merge tags, and loops over template_data that could only blow the render
    # budget, are refused now, with their position, not discovered at render.
    check_merge_tags(clean_subject(fields["subject"]), html, fields.get("text"), path_prefix=path_prefix,
                     template_html=template["html"] if template else None,
                     template_data=fields.get("template_data"))
    if domains is None:
        domains = await domain_store.verified_map(db(), workspace["_id"])
    try:
        sender = sender_rules.resolve_sender(
            from_email=fields.get("from_email"), from_name=fields.get("from_name"),
            reply_to=fields.get("reply_to"), default_from_email=workspace.get("default_from_email"),
            shared_local_part=workspace.get("sending_local_part")
            or sender_rules.workspace_local_part(workspace["name"], workspace["_id"]),
            shared_domain=settings().shared_domain, domains=domains)
    except PostroomError as error:  # name the batch item the rule failed on
        if path_prefix and error.path:
            error.path = path_prefix + error.path
        raise
    to = fields["to"] if isinstance(fields["to"], list) else [fields["to"]]
    to = list(dict.fromkeys(to))
    if suppressed is None:
        suppressed = await suppression_store.suppressed_among(db(), workspace["_id"], to)
    now = now_iso()
    doc = {
        "_id": new_message_id(),
        "workspace_id": workspace["_id"],
        "key_id": who.key_id,
        "sandbox": who.sandbox,
        "kind": "transactional",
        "to": to,
        "subject": clean_subject(fields["subject"]),
        "html": html,
        "text": fields.get("text"),
        "template_id": fields.get("template_id"),
        "template_version": template["version"] if template else None,  # rendered exactly as sent
        "template_data": fields.get("template_data") or {},
        "from_address": sender.from_address,
        "from_name": sender.from_name,
        "reply_to": sender.reply_to,
        "signing_domain": sender.signing_domain,
        "custom_domain": sender.custom_domain,
        "track_opens": bool(fields.get("track_opens")),
        "track_clicks": bool(fields.get("track_clicks")),
        "status": "queued",
        "queued_at": now,
        "attempts": 0,
        "batch_id": None,
        "campaign_id": None,
        "created_at": now,
        "updated_at": now,
        "history": [{"status": "queued", "at": now}],
    }
    return without_suppressed(doc, suppressed)


def without_suppressed(doc: dict, suppressed: set[str]) -> dict:
    """Suppressed recipients are dropped and listed in `suppressed_recipients`; with none
    left the message is final as `suppressed` (stored, never enqueued, `to` kept as asked)."""
    doc["suppressed_recipients"] = []
    split = recipients.without_suppressed(doc, suppressed)
    if split is not None:
        changes, nobody_left = split
        doc.update(changes)
        if nobody_left:
            detail = "all recipients are on the suppression list"
            doc.update(status="suppressed", suppressed_at=doc["created_at"],
                       history=[{"status": "suppressed", "at": doc["created_at"], "detail": detail}])
    return doc


def schedule_fields(send_at: dt.datetime) -> dict:
    when = send_at if send_at.tzinfo else send_at.replace(tzinfo=dt.timezone.utc)
    now = utcnow()
    if when <= now:
        raise InvalidSchedule("send_at must be in the future.", path="send_at")
    if when - now > MAX_SCHEDULE_AHEAD:
        raise InvalidSchedule("send_at must be within 72 hours from now.", path="send_at")
    at = now_iso()
    return {"status": "scheduled", "due_at": iso(when), "queued_at": None,
            "history": [{"status": "scheduled", "at": at}]}


async def charge_plan(who: Caller, count: int) -> None:
    """The plan's monthly sending limit (403 limit_reached). Emails are counted when the
    API accepts them, all or none per request; sandbox keys send nothing and count nothing."""
    if who.sandbox:
        return
    limit = throttle.monthly_limit(who.workspace, settings().plan_monthly_email_limit)
    # Counted even when unlimited, so a limit set mid-month sees the month's real usage.
    if not await send_limits.charge_plan(db(), who.workspace_id, throttle.month_of(utcnow()), count, limit):
        raise Forbidden(f"The plan's limit of {limit} emails this month has been reached.",
                        code="limit_reached")


async def refund_plan(workspace_id: str, count: int, accepted_at: str | None = None) -> None:
    """Give back live emails that will never be sent (not stored, not queued, or a scheduled
    send cancelled), to the month they were counted in."""
    month = throttle.month_of(parse_iso(accepted_at) if accepted_at else utcnow())
    await send_limits.refund_plan(db(), workspace_id, month, count)


async def charge_store_and_enqueue(who: Caller, docs: list[dict], batch: dict | None = None) -> None:
    """Charge the plan for the messages that will be sent, then store the batch (if any) and
    the messages and enqueue them. Whatever then fails to be stored or queued is given back,
    so the client's retry is not counted twice."""
    count = sum(1 for d in docs if d["status"] != "suppressed")
    await charge_plan(who, count)
    try:
        if batch is not None:
            await batch_store.insert(db(), batch)
        await _store_and_enqueue(docs)
    except Exception as error:
        if not who.sandbox:
            await refund_plan(who.workspace_id, getattr(error, "unsent", count))
        raise


RENDER_CHUNK = 100  # message ids per render job: one bulk read and write per chunk


async def build_batch(items: list[dict], who: Caller) -> tuple[dict, list[dict]]:
    """Every item checked on its own (the first failure names `messages[i]...`), with the
    workspace's domains and suppressions looked up once for the whole batch."""
    workspace_id = who.workspace_id
    domains = await domain_store.verified_map(db(), workspace_id)
    everyone = list(dict.fromkeys(r for item in items
                                  for r in (item["to"] if isinstance(item["to"], list) else [item["to"]])))
    suppressed = await suppression_store.suppressed_among(db(), workspace_id, everyone)
    templates: dict = {}
    docs = [await build_message(item, who, path_prefix=f"messages[{i}].", suppressed=suppressed,
                                domains=domains, templates=templates) for i, item in enumerate(items)]
    batch_id = new_batch_id()
    for doc in docs:
        doc["batch_id"] = batch_id
    batch = batch_store.new_batch(batch_id, workspace_id, who.key_id, [d["_id"] for d in docs],
                                  [d["status"] for d in docs])
    return batch, docs


async def _store_and_enqueue(docs: list[dict], *, failure_code: str = "schedule_failed") -> None:
    """Store the messages, then hand the ones to send now to the `render` queue in chunks.
    A store or broker failure answers 500 `failure_code`; messages whose enqueue failed
    are marked failed, so the stale-queue sweep never sends what the client will retry,
    and the error carries how many will not be sent (`unsent`)."""
    from actors.render import render_messages
    try:
        await message_store.insert_many(db(), docs)
    except PyMongoError as error:
        raise ServerError("The email could not be stored; nothing will be sent. Retry with backoff.",
                          code=failure_code) from error
    due = [d["_id"] for d in docs if d["status"] == "queued"]
    for start in range(0, len(due), RENDER_CHUNK):
        chunk = due[start:start + RENDER_CHUNK]
        try:
            await enqueue(render_messages, chunk, failure_code=failure_code)
        except ServerError as error:
            left = due[start:]
            why = "could not be queued for sending"
            await message_store.advance(db(), [(mid, "failed", {"error": why}, why) for mid in left])
            await batch_store.record_finished(db(), [(d, "failed") for d in docs if d["_id"] in set(left)])
            error.unsent = len(left)
            raise
