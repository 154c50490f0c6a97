"""The event types of API spec §6 (and `email.received`, issue 36): what a subscription may name, and what the outbox
records. One subscription made with `POST /webhooks/triggers` concerns one of these."""

from __future__ import annotations

from pipelines import views
from pipelines.core.clock import ms_of
from pipelines.webhooks.signing import encode_payload

EVENT_TYPES: tuple[str, ...] = (
    "contact.created", "contact.updated", "contact.subscribed", "contact.unsubscribed",
    "campaign.sent", "campaign.completed",
    "email.sent", "email.delivered", "email.opened", "email.clicked", "email.bounced",
    "email.complained",
    "flow.triggered", "flow.completed",
    "form.submitted",
    "conversion.created",
    "list.member_added", "list.member_removed",
    # beside the spec's 18: a message received at an inbound address (docs/inbound.md)
    "email.received",
)

# What `POST /webhooks/:id/test` sends in X-Service-Event; never recorded in the outbox,
# so no subscription receives it except through the test operation.
TEST_EVENT = "webhook.test"


# Delivery times the store filters and sorts on are integers (epoch ms), never ISO strings:
# the embedded store answers a filter holding a date-like string by reading the whole
# collection under its one lock.
NEVER_MS = 2**62
# `lane_due` of a delivery that is not waiting for an attempt (delivered, failed, cancelled):
# sorts before every lane's range, so no lane query ever sees it.
OFF_LANE = ""
# The latest time a lane key can carry (16 digits: the year 2286).
LANE_END_MS = 10**16 - 1


def delivery_id(event_id: str, webhook_id: str) -> str:
    """Deterministic, so dispatching one event twice never makes a second delivery."""
    return f"{event_id}:{webhook_id}"


def lane_due(webhook_id: str, due_ms: int) -> str:
    """One indexed string that orders a subscription's deliveries by when they are due:
    `<subscription id>~<due ms, 16 digits>`. A lane's due work is one range of one
    single-field index (the embedded store sorts a compound index's range by reading
    every match), and a delivery's lease is the same field moved to the lease's end."""
    return f"{webhook_id}~{due_ms:016d}"


def lane_range(webhook_id: str, upto_ms: int = LANE_END_MS) -> dict:
    """The filter on `lane_due` for the lane's deliveries due at `upto_ms` at the latest."""
    return {"$gte": lane_due(webhook_id, 0), "$lte": lane_due(webhook_id, upto_ms)}


def due_ms_of(key: str) -> int:
    return int(key.rsplit("~", 1)[1])


def contact_tag_ids(events: list[dict]) -> list[str]:
    """The tag ids the events' contacts carry (stored as ids; delivered named)."""
    return sorted({t for e in events for t in ((e.get("data") or {}).get("contact") or {}).get("tags") or ()})


def with_tag_names(event: dict, names: dict[str, str]) -> dict:
    """The event with its contact's tags as [{id, name}], as the API shows a contact."""
    data = event.get("data") or {}
    contact = data.get("contact")
    if not isinstance(contact, dict) or "tags" not in contact:
        return event
    return {**event, "data": {**data, "contact": {**contact, "tags": views.named_tags(contact["tags"], names)}}}


def plan_deliveries(event: dict, subscriptions: list[dict], now: str) -> list[dict]:
    """One pending delivery per active subscription of the event's workspace that names
    its type and existed when it happened, due at once.

    The body is serialised here, once: every attempt sends (and signs) these bytes."""
    body = encode_payload(event["event"], event["timestamp"], event.get("data") or {})
    due = ms_of(now)
    return [{
        "_id": delivery_id(event["_id"], sub["_id"]),
        "workspace_id": event["workspace_id"],
        "webhook_id": sub["_id"],
        "event_id": event["_id"],
        "event": event["event"],
        "body": body,
        "status": "pending",
        "attempt_count": 0,
        "next_attempt_at": now,  # for people (the delivery log); the store reads the integers
        "due_ms": due,
        "lane_due": lane_due(sub["_id"], due),
        "locked_by": "",
        "last_status_code": 0,
        "last_error": None,
        "created_at": now,
        "updated_at": now,
    } for sub in subscriptions
        if sub["workspace_id"] == event["workspace_id"] and sub.get("active")
        and event["event"] in sub.get("events", ()) and sub["created_at"] <= event["timestamp"]]
