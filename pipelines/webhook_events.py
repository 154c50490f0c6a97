"""The event types of API spec §6: what a subscription may name, and what the outbox
records. One subscription made with `POST /webhooks/triggers` concerns one of these."""

from __future__ import annotations

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


def is_event_type(name: str) -> bool:
    return name in EVENT_TYPES
