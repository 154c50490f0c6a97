"""Every resource as the API shows it (spec §6), one function a resource: the front's answers,
the webhook and event payloads of the store layer and the actors all take their shape here.
Pure: a stored document (and the counts or rendered parts the caller looked up) in, a dict out."""

from __future__ import annotations

from pipelines.audience import forms
from pipelines.automations.runs import ms_iso
from pipelines.campaigns import stats as campaign_stats
from pipelines.core.documents import BounceRecord, Campaign, Suppression, WebhookSubscription
from pipelines.domains import dns_records
from pipelines.inbound_routes import received_event
from pipelines.messages import dkim
from pipelines.messages.delivery_status import BATCH_OUTCOMES


def activity(doc: dict) -> dict:
    return {"id": doc["_id"], "action": doc["action"], "key_id": doc["key_id"],
            "details": doc["details"], "at": doc["at"]}


def contact(doc: dict) -> dict:
    """Used by API responses and event data. Booleans are coerced: the embedded store hands
    back a `$set` boolean as 0/1. `tags` are ids here, as events are stored (automations
    read them so); what a client sees names them (`named_tags`: the API answer, a webhook
    delivery)."""
    return {
        "id": doc["_id"], "email": doc["email"], "first_name": doc.get("first_name"),
        "last_name": doc.get("last_name"), "attributes": doc.get("attributes") or {},
        "subscribed": bool(doc["subscribed"]), "bounced": bool(doc["bounced"]), "tags": doc.get("tags", []),
        "created_at": doc["created_at"], "updated_at": doc["updated_at"],
        "unsubscribed_at": doc.get("unsubscribed_at"),
    }


def named_tags(tag_ids: list[str], names: dict[str, str]) -> list[dict]:
    """[{id, name}] of the tags among `tag_ids` that exist (`names`: id → name), shown as a
    contact's `lists` are; a tag deleted meanwhile is left out."""
    return [{"id": tag_id, "name": names[tag_id]} for tag_id in tag_ids if tag_id in names]


def contact_job(doc: dict) -> dict:
    """An import or export job; an export names where its CSV is downloaded."""
    out = {k if k != "_id" else "id": v for k, v in doc.items() if k not in ("workspace_id", "file_chunks")}
    if doc["kind"] == "export":
        out["download_url"] = f"/api/v1/contacts/export/{doc['_id']}/download"
    return out


def contact_list(doc: dict, member_count: int) -> dict:
    return {"id": doc["_id"], "name": doc["name"], "description": doc.get("description"),
            "type": doc["type"], "conditions": doc.get("conditions"), "member_count": member_count,
            "created_at": doc["created_at"], "updated_at": doc["updated_at"]}


def tag(doc: dict, contact_count: int) -> dict:
    return {"id": doc["_id"], "name": doc["name"], "color": doc["color"], "description": doc.get("description"),
            "contact_count": contact_count, "created_at": doc["created_at"], "updated_at": doc["updated_at"]}


def segment(doc: dict) -> dict:
    return {"id": doc["_id"], "name": doc["name"], "description": doc.get("description"),
            "conditions": doc["conditions"], "created_at": doc["created_at"], "updated_at": doc["updated_at"]}


def automation(doc: dict) -> dict:
    return {"id": doc["_id"], "name": doc["name"], "status": doc["status"], "trigger_type": doc["trigger_type"],
            "trigger_config": doc["trigger_config"],
            "steps": [step(s, i) for i, s in enumerate(doc["steps"])],
            "created_at": doc["created_at"], "updated_at": doc["updated_at"], "activated_at": doc.get("activated_at")}


def step(doc: dict, position: int) -> dict:
    return {"id": doc["id"], "step_type": doc["step_type"], "config": doc["config"], "position": position}


def run(doc: dict, steps: list[dict] | None = None) -> dict:
    """An automation run; `steps`, its automation's, place its current step."""
    position = next((i for i, s in enumerate(steps or []) if s["id"] == doc["step_id"]), None)
    current = None
    if doc["step_id"]:
        at = (steps or [])[position] if position is not None else {}
        current = {"id": doc["step_id"], "position": position, "step_type": at.get("step_type")}
    waiting = doc["phase"] in ("waiting", "calling") or doc["status"] == "paused"
    wake = doc["resume_ms"] if doc["status"] == "paused" else doc["wake_ms"]
    return {
        "id": doc["_id"], "automation_id": doc["automation_id"],
        "contact": {"id": doc["contact_id"], "email": doc["contact_email"]},
        "status": doc["status"], "current_step": current,
        "waiting_for": doc["wait_event"] or None,
        "next_wake_at": ms_iso(wake) if waiting and doc["phase"] == "waiting" else None,
        "history": sorted(doc.get("history") or [], key=lambda e: (e["at"], e.get("seq", 0))),
        "error": doc.get("error"), "trigger": doc["trigger"],
        "started_at": doc["created_at"], "updated_at": doc["updated_at"], "ended_at": doc.get("ended_at"),
    }


def suppression(doc: Suppression) -> dict:
    return {"email": doc["email"], "reason": doc["reason"], "source": doc.get("source", "api"),
            "detail": doc.get("detail") or None, "created_at": doc["created_at"]}


def bounce(doc: BounceRecord) -> dict:
    return {
        "id": doc["_id"], "message_id": doc["message_id"] or None, "email": doc["email"],
        "type": doc["type"], "category": doc.get("category") or None, "kind": doc["kind"],
        "smtp_status": doc["smtp_status"] or None,
        "diagnostic_code": doc["diagnostic_code"] or None, "isp_name": doc["isp_name"] or None,
        "source": doc["source"], "action": doc["action"] or None,
        "reporting_mta": doc["reporting_mta"] or None, "feedback_type": doc["feedback_type"] or None,
        "created_at": doc["created_at"],
    }


def campaign(doc: Campaign) -> dict:
    stats = campaign_stats.stats(doc)
    return {
        "id": doc["_id"], "name": doc["name"], "subject": doc["subject"],
        "template_id": doc["template_id"], "list_id": doc["list_id"], "segment_id": doc["segment_id"],
        "status": doc["status"], "from_email": doc["from_email"], "from_name": doc["from_name"],
        "reply_to": doc["reply_to"], "track_opens": doc["track_opens"], "track_clicks": doc["track_clicks"],
        "scheduled_at": doc.get("send_at"), "created_at": doc["created_at"], "updated_at": doc["updated_at"],
        "started_at": doc.get("started_at"), "completed_at": doc.get("completed_at"),
        "cancelled_at": doc.get("cancelled_at"), "failure_reason": doc.get("failure_reason"),
        "total_recipients": doc.get("total_recipients", 0), "batches_queued": doc.get("batches_queued", 0),
        "stats": stats, "rates": campaign_stats.rates(stats), "stats_at": doc.get("stats_at"),
    }


def domain(doc: dict) -> dict:
    return {
        "id": doc["_id"],
        "domain": doc["domain"],
        "verified": bool(doc["verified"]),
        "verified_at": doc.get("verified_at"),
        "dkim": {"selector": doc["dkim_selector"], "algorithm": "rsa-sha256", "key_bits": dkim.KEY_BITS},
        "dns_records": doc["records"],
        "dmarc": doc.get("dmarc") or dns_records.dmarc_record(doc["domain"]),  # absent: added before DMARC was
        "created_at": doc["created_at"],
        "last_checked_at": doc.get("last_checked_at"),
    }


def subscription(doc: WebhookSubscription, event: str | None = None) -> dict:
    """A webhook subscription; `event`: the one a list was filtered by (a second-form
    subscription has several)."""
    return {"id": doc["_id"], "event": event or doc["events"][0], "events": doc["events"],
            "targetUrl": doc["target_url"], "url": doc["target_url"], "createdAt": doc["created_at"],
            "active": doc["active"]}


def delivery(doc: dict, attempts: list[dict]) -> dict:
    """A webhook delivery with its attempts."""
    return {"id": doc["_id"], "event": doc["event"], "event_id": doc["event_id"], "status": doc["status"],
            "attempt_count": doc["attempt_count"],
            "next_attempt_at": doc["next_attempt_at"] if doc["status"] == "pending" else None,
            "delivered_at": doc.get("delivered_at"), "last_status_code": doc["last_status_code"],
            "last_error": doc.get("last_error"), "created_at": doc["created_at"],
            "attempts": [{"attempt": a["attempt"], "at": a["at"], "status_code": a["status_code"],
                          "duration_ms": a["duration_ms"], "error": a.get("error")} for a in attempts]}


def batch_status(doc: dict) -> str:
    """processing until every message is final; then failed if none was delivered
    (every one failed, bounced or was suppressed), else completed."""
    if doc["finished"] < doc["total"]:
        return "processing"
    return "completed" if doc["delivered"] > 0 else "failed"


def batch_completed_at(doc: dict) -> str | None:
    """When every message of the batch was final (None while it is processing)."""
    if doc["finished"] < doc["total"]:
        return None
    return doc["completed_at"] or doc.get("last_finished_at") or None


def batch(doc: dict) -> dict:
    return {
        "batch_id": doc["_id"],
        "status": batch_status(doc),
        "total": doc["total"],
        "counts": {"queued": doc["pending"], "sent": doc["sent"], **{k: doc[k] for k in BATCH_OUTCOMES}},
        "created_at": doc["created_at"],
        "completed_at": batch_completed_at(doc),
    }


def message_status(doc: dict) -> dict:
    return {
        "message_id": doc["_id"],
        "status": doc["status"],
        "to": doc["to"],
        "cc": doc.get("cc", []),
        "bcc": doc.get("bcc", []),
        "subject": doc["subject"],
        "metadata": doc.get("metadata") or {},
        "tags": doc.get("tags") or [],
        "attachments": [{k: a[k] for k in ("filename", "content_type", "content_id", "size")}
                        for a in doc.get("attachments") or ()],
        "created_at": doc["created_at"],
        "scheduled_at": doc.get("due_at"),
        "queued_at": doc.get("queued_at"),
        "sent_at": doc.get("sent_at"),
        "delivered_at": doc.get("delivered_at"),
        "opened_at": doc.get("opened_at"),
        "clicked_at": doc.get("clicked_at"),
        "bounced_at": doc.get("bounced_at"),
        "failed_at": doc.get("failed_at"),
        "cancelled_at": doc.get("cancelled_at"),
        "error": doc.get("error"),
        "smtp_response": doc.get("smtp_response"),
        "sandbox": bool(doc.get("sandbox")),
        "batch_id": doc.get("batch_id"),
        "history": doc.get("history", []),
        "suppressed_recipients": doc.get("suppressed_recipients", []),
    }


def product_view(event: dict, email: str) -> dict:
    """A `page_viewed` contact event as POST /track/product-view answers it."""
    return {"id": event["_id"], "contact_id": event["contact_id"], "contact_email": email,
            "event": event["type"], **event["data"], "viewed_at": event["at"]}


def _with_content(out: dict, doc: dict, full: bool) -> dict:
    if full:
        out.update(html=doc["html"], json_structure=doc.get("json_structure"))
    return out


def template(doc: dict, *, full: bool = True) -> dict:
    """`full`: with html and json_structure (a list leaves them out)."""
    return _with_content({"id": doc["_id"], "name": doc["name"], "description": doc.get("description"),
                          "version": doc["version"], "created_at": doc["created_at"],
                          "updated_at": doc["updated_at"]}, doc, full)


def template_version(doc: dict, *, full: bool = True) -> dict:
    return _with_content({"template_id": doc["template_id"], "version": doc["version"], "name": doc["name"],
                          "description": doc.get("description"), "restored_from": doc.get("restored_from"),
                          "created_at": doc["created_at"]}, doc, full)


def form(doc: dict, *, action: str, token: str, embed_html: str) -> dict:
    """A sign-up form with its defaults filled in; `action` is its hosted URL, `embed_html`
    the rendered embed snippet."""
    shown = forms.effective(doc)
    return {
        "id": doc["_id"], "name": doc["name"], "list_ids": doc.get("list_ids") or [],
        "fields": [{k: f[k] for k in ("name", "type", "label", "required")} for f in shown["fields"]],
        **{k: shown[k] for k in ("double_opt_in", "title", *forms.DEFAULT_TEXTS)},
        **{k: doc.get(k) for k in ("description", "from_name", "redirect_url", "confirmed_redirect_url")},
        "allowed_origins": doc.get("allowed_origins") or [],
        "hosted_url": action,
        "embed": {"action": action, "token": token, "html": embed_html.strip()},
        "created_at": doc["created_at"], "updated_at": doc["updated_at"],
    }


def inbound_route(doc: dict) -> dict:
    """An inbound route (its secret is shown only when it is made)."""
    return {"id": doc["_id"], "pattern": doc["pattern"], "url": doc["target_url"], "priority": doc["priority"],
            "description": doc.get("description"), "created_at": doc["created_at"]}


def inbound_message(doc: dict, *, full: bool = False) -> dict:
    """A received message; `full`: with its envelope, verdicts and the parsed message
    (a list leaves them out)."""
    summary = (doc.get("authentication") or {}).get("summary")
    out = {"id": doc["_id"], "status": doc["status"], "received_at": doc["received_at"],
           "recipient": doc["recipient"], "tag": doc["tag"], "from": doc.get("from_key"),
           "subject": doc.get("subject"), "route_id": doc.get("route_id"),
           "auto_submitted": bool(doc.get("auto_submitted")), "size_bytes": doc["size_bytes"],
           "authentication_summary": summary if isinstance(summary, str) else None}
    if full:
        out.update({"envelope": received_event.envelope(doc), "authentication": doc.get("authentication"),
                    "message": doc.get("parsed"),
                    "processed_at": doc.get("processed_at")})
    return out


def inbound_domain(doc: dict) -> dict:
    return {"id": doc["_id"], "domain": doc["domain"], "verified": bool(doc["verified"]),
            "verified_at": doc.get("verified_at"), "dns_records": doc["records"], "created_at": doc["created_at"],
            "last_checked_at": doc.get("last_checked_at")}
