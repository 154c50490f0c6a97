"""The event types of API spec §6: what a subscription may name, and what the outbox
records. One subscription made with `POST /webhooks/triggers` concerns one of these."""

from __future__ import annotations

from .webhook_signing import encode_payload

EVENT_TYPES: tuple[str, ...] = (
    "contact.created", "contact.updated", "contact.subscribed", "contact.unsubscribed",
    "campaign.sent", "campaign.completed",
    "email.sent", "email.delivered", "email.opened", "email.clicked", "email.bounced",
    "email.complained",
    "flow.triggered", "flow.completed",
    "form.submitted",
    "conversion.created",
    "list.member_added", "list.member_removed",
)

# What `POST /webhooks/:id/test` sends in X-Service-Event; never recorded in the outbox,
# so no subscription receives it except through the test operation.
TEST_EVENT = "webhook.test"




# A free lease, and "not handed to the broker": a time before every real one.
NEVER = "1970-01-01T00:00:00.000000Z"
# How long a delivery put on the broker is left to it before the scheduler assumes the
# message was lost and enqueues it again (duplicates are harmless: attempts take a lease).
HANDOFF_GRACE_SECONDS = 300


def delivery_id(event_id: str, webhook_id: str) -> str:
    """Deterministic, so dispatching one event twice never makes a second delivery."""
    return f"{event_id}:{webhook_id}"


def plan_deliveries(event: dict, subscriptions: list[dict], now: str, handoff_until: str) -> list[dict]:
    """One pending delivery per active subscription of the event's workspace that names
    its type and existed when it happened.

    The body is serialised here, once: every attempt sends (and signs) these bytes."""
    body = encode_payload(event["event"], event["timestamp"], event.get("data") or {})
    return [{
        "_id": delivery_id(event["_id"], sub["_id"]),
        "workspace_id": event["workspace_id"],
        "webhook_id": sub["_id"],
        "event_id": event["_id"],
        "event": event["event"],
        "body": body,
        "status": "pending",
        "attempt_count": 0,
        "next_attempt_at": now,
        "handoff_until": handoff_until,
        "locked_by": "",
        "locked_until": NEVER,
        "last_status_code": 0,
        "last_error": None,
        "created_at": now,
        "updated_at": now,
    } for sub in subscriptions
        if sub["workspace_id"] == event["workspace_id"] and sub.get("active")
        and event["event"] in sub.get("events", ()) and sub["created_at"] <= event["timestamp"]]
