"""From a validated send request to the message document the pipeline works on. Shared
by single sends and batch items so both obey the same rules."""

from __future__ import annotations

import datetime as dt

from mongo import domains as domain_store
from mongo import suppressions as suppression_store
from pipelines import sender as sender_rules
from pipelines.clock import iso, now_iso, utcnow
from pipelines.errors import InvalidSchedule, NoContent, ValidationFailed
from pipelines.ids import new_message_id
from pipelines.text import clean_subject

from .runtime import Caller, db, settings

MAX_SCHEDULE_AHEAD = dt.timedelta(hours=72)


async def build_message(fields: dict, who: Caller, *, path_prefix: str = "",
                        suppressed: set[str] | None = None) -> dict:
    """`suppressed`: the suppressed addresses among the recipients when the caller already
    looked them up in bulk (batch sends); otherwise they are looked up here."""
    if not any(fields.get(k) for k in ("html", "text", "template_id")):
        raise NoContent("One of html, text or template_id is required.", path=path_prefix or None)
    html = fields.get("html")
    if html is not None and len(html.encode()) > settings().max_html_bytes:
        raise ValidationFailed(f"html is larger than {settings().max_html_bytes // 1024} KB.",
                               path=f"{path_prefix}html")
    workspace = who.workspace
    sender = sender_rules.resolve_sender(
        from_email=fields.get("from_email"), from_name=fields.get("from_name"),
        reply_to=fields.get("reply_to"), default_from_email=workspace.get("default_from_email"),
        shared_local_part=workspace.get("sending_local_part")
        or sender_rules.workspace_local_part(workspace["name"], workspace["_id"]),
        shared_domain=settings().shared_domain,
        domains=await domain_store.verified_map(db(), workspace["_id"]))
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
    blocked = [r for r in doc["to"] if r in suppressed]
    doc["suppressed_recipients"] = blocked
    if blocked and len(blocked) == len(doc["to"]):
        detail = "all recipients are on the suppression list"
        doc.update(status="suppressed", suppressed_at=doc["created_at"],
                   history=[{"status": "suppressed", "at": doc["created_at"], "detail": detail}])
    elif blocked:
        doc["to"] = [r for r in doc["to"] if r not in suppressed]
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
