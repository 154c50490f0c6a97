"""What happened to one message, oldest first (GET /email/:id), read from what the send
path, the recipient's side and bounce reports already keep — no store write exists for
the timeline alone:

- the message's `history` (its status moves: queued, scheduled, deferred with the reason
  and the next attempt's time, sent, delivered, bounced, failed, cancelled, suppressed,
  the first open, the first click with its URL);
- its `smtp_attempts` (pipelines/messages/outcomes.attempts_kept: the last 20, each
  reply's code and text, when the MIME it sent was rendered);
- its engagement counts (`open_count`, `last_open_at`, … : mongo/tracking.count_engagement)
  for what moved no status (an open after a click, an unsubscribe);
- the bounce and complaint records that name it (`bounces`, with the report's diagnostic).

A message's list item (`list_item`) is the same document without the timeline."""

from __future__ import annotations

from collections.abc import Iterable

# history status → timeline event (the first entry is the acceptance itself)
_FROM_HISTORY = {"queued": "queued", "scheduled": "scheduled", "deferred": "deferred", "sent": "sent",
                 "delivered": "delivered", "bounced": "bounced", "failed": "failed", "cancelled": "cancelled",
                 "suppressed": "suppressed", "opened": "opened", "clicked": "clicked"}


def list_item(doc: dict) -> dict:
    return {
        "id": doc["_id"], "to": doc["to"], "subject": doc["subject"], "status": doc["status"],
        "stream": doc.get("stream"), "campaign_id": doc.get("campaign_id"), "batch_id": doc.get("batch_id"),
        "tags": list(doc.get("tags") or []), "metadata": dict(doc.get("metadata") or {}),
        "created_at": doc["created_at"], "sent_at": doc.get("sent_at"), "delivered_at": doc.get("delivered_at"),
    }


def _event(kind: str, at: str, **fields) -> dict:
    return {"type": kind, "at": at, **{k: v for k, v in fields.items() if v is not None}}


def _from_history(doc: dict) -> list[dict]:
    entries = sorted(doc.get("history") or [], key=lambda e: e["at"])
    events = [_event("accepted", doc["created_at"], status=entries[0]["status"] if entries else doc["status"])]
    for entry in entries[1:] if entries and entries[0]["at"] == doc["created_at"] else entries:
        kind = _FROM_HISTORY.get(entry["status"], entry["status"])
        detail = entry.get("detail")
        if kind == "clicked":
            events.append(_event(kind, entry["at"], url=detail))
        else:
            events.append(_event(kind, entry["at"], detail=detail))
    return events


def _from_attempts(doc: dict) -> list[dict]:
    events, rendered = [], set()
    for attempt in doc.get("smtp_attempts") or []:
        if attempt.get("rendered_at") and attempt["rendered_at"] not in rendered:
            rendered.add(attempt["rendered_at"])
            events.append(_event("rendered", attempt["rendered_at"]))
        events.append(_event("smtp_attempt", attempt["at"], code=attempt["code"], text=attempt["text"],
                             outcome=attempt.get("outcome"), next_attempt_at=attempt.get("next_attempt_at"),
                             recipients=attempt.get("recipients")))
    return events


def _from_counts(doc: dict, seen: set[str]) -> list[dict]:
    """What the counts add: an open or click that moved no status, an unsubscribe."""
    events = []
    for kind, event in (("open", "opened"), ("click", "clicked"), ("unsubscribe", "unsubscribed")):
        if int(doc.get(f"{kind}_count") or 0) and event not in seen and doc.get(f"last_{kind}_at"):
            events.append(_event(event, doc[f"last_{kind}_at"], count=int(doc[f"{kind}_count"])))
    return events


def _from_reports(reports: Iterable[dict]) -> list[dict]:
    return [_event("complained" if r["kind"] == "complaint" else "bounce_report", r["created_at"],
                   email=r.get("email"), bounce_type=r.get("type"), category=r.get("category") or None,
                   smtp_status=r.get("smtp_status") or None, diagnostic=r.get("diagnostic_code") or None,
                   source=r.get("source"), bounce_id=r["_id"]) for r in reports]


def timeline(doc: dict, reports: Iterable[dict] = ()) -> list[dict]:
    """Every event of the message, oldest first (events of one moment in the order they
    happen: the attempt before the status it led to)."""
    events = _from_history(doc)
    events += _from_attempts(doc)
    events += _from_counts(doc, {e["type"] for e in events})
    events += _from_reports(reports)
    order = {"accepted": 0, "rendered": 1, "smtp_attempt": 2}
    return sorted(events, key=lambda e: (e["at"], order.get(e["type"], 3)))


def detail(doc: dict, reports: Iterable[dict] = ()) -> dict:
    """GET /email/:id: the list item, what the status answer adds, and the timeline."""
    return {**list_item(doc), "error": doc.get("error"), "smtp_response": doc.get("smtp_response"),
            "sandbox": bool(doc.get("sandbox")), "suppressed_recipients": doc.get("suppressed_recipients", []),
            "bodies_dropped": bool(doc.get("bodies_dropped_at")), "timeline": timeline(doc, reports)}
