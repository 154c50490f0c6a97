"""What to do with the SMTP outcomes of one send attempt: which messages are delivered,
bounced, retried later or given up on, and what that emits (events, bounce records,
batch and analytics counts). Plain values in, a plan out; the `send` actor applies it in
a handful of bulk writes.

Per message, over its recipients:
- any recipient accepted (2xx)          → `delivered` (via `sent`), email.sent + email.delivered;
                                          permanently refused recipients still become bounces
- every recipient refused permanently   → `bounced` at once, one bounce per recipient
- only transient refusals (4xx, no
  connection)                           → retried with backoff, up to MAX_ATTEMPTS, then `failed`
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from .clock import now_iso
from .transport import Outcome

MAX_ATTEMPTS = 8
# Backoff for transient failures (4xx, connection errors); short enough to ride the
# broker's delay queue (nothing waits there longer than a minute).
RETRY_DELAYS_MS = (5_000, 15_000, 30_000, 60_000, 60_000, 60_000, 60_000, 60_000)


@dataclasses.dataclass
class OutcomePlan:
    transitions: list = dataclasses.field(default_factory=list)   # messages.advance tuples
    events: list = dataclasses.field(default_factory=list)        # outbox documents
    finished: list = dataclasses.field(default_factory=list)      # (message, final outcome)
    retry_ids: list = dataclasses.field(default_factory=list)
    retry_notes: dict = dataclasses.field(default_factory=dict)
    bounces: list = dataclasses.field(default_factory=list)       # synchronous 5xx, per recipient
    analytics: dict = dataclasses.field(default_factory=dict)     # {(workspace_id, day): Counter}
    retry_delay_ms: int = 0

    @property
    def finished_ids(self) -> list[str]:
        return [m["_id"] for m, _ in self.finished]


def retry_delay_ms(attempt: int) -> int:
    return RETRY_DELAYS_MS[min(attempt, len(RETRY_DELAYS_MS) - 1)]


def _event(message: dict, event: str, data: dict) -> dict:
    return {
        "_id": f"{message['_id']}:{event}",
        "workspace_id": message["workspace_id"],
        "event": event,
        "data": {"message_id": message["_id"], "to": message["to"], "subject": message["subject"],
                 **({"campaign_id": message["campaign_id"]} if message.get("campaign_id") else {}),
                 **({"batch_id": message["batch_id"]} if message.get("batch_id") else {}),
                 **data},
        "timestamp": now_iso(),
        "dispatched": False,
    }


def _count(plan: OutcomePlan, message: dict, **fields: int) -> None:
    counter = plan.analytics.setdefault((message["workspace_id"], now_iso()[:10]), Counter())
    counter.update(fields)


def _line(outcome: Outcome) -> str:
    return f"{outcome.code} {outcome.text}".strip()


def plan_outcomes(results: list[tuple[dict, dict[str, Outcome] | None]]) -> OutcomePlan:
    """`results` pairs each claimed message (its `attempts` so far) with its outcomes per
    recipient, or None when it had no rendered MIME."""
    plan = OutcomePlan()
    retry_attempts = []
    for message, outcomes in results:
        mid = message["_id"]
        attempt = int(message.get("attempts") or 0)
        if outcomes is None:
            why = "rendered message missing"
            plan.transitions.append((mid, "failed", {"error": why}, why))
            plan.finished.append((message, "failed"))
            continue
        accepted = [r for r, o in outcomes.items() if o.accepted]
        permanent = {r: o for r, o in outcomes.items() if o.permanent}
        transient = {r: o for r, o in outcomes.items() if not o.accepted and not o.permanent}
        per_recipient = {r: {"code": o.code, "text": o.text} for r, o in outcomes.items()}
        for recipient, outcome in permanent.items():
            plan.bounces.append({"message": message, "email": recipient, "code": outcome.code,
                                 "text": outcome.text})
        if accepted:
            response = _line(outcomes[accepted[0]])
            extra = {"smtp_response": response, "recipients_result": per_recipient}
            plan.transitions.append((mid, "delivered", extra, response, ("sent",)))
            plan.events.append(_event(message, "email.sent", {"sent_at": now_iso()}))
            plan.events.append(_event(message, "email.delivered", {"smtp_response": response}))
            plan.finished.append((message, "delivered"))
            kind = "campaign_sends" if message.get("kind") == "campaign" else "api_sends"
            _count(plan, message, sends=1, delivered=1, **{kind: 1})
        elif permanent:
            detail = _line(next(iter(permanent.values())))
            plan.transitions.append((mid, "bounced", {"smtp_response": detail,
                                                      "recipients_result": per_recipient}, detail))
            plan.finished.append((message, "bounced"))
            _count(plan, message, bounces=1)
        elif attempt + 1 < MAX_ATTEMPTS:
            plan.retry_ids.append(mid)
            retry_attempts.append(attempt)
            plan.retry_notes[mid] = _line(next(iter(transient.values())))
        else:
            detail = "gave up after %d attempts: %s" % (attempt + 1, _line(next(iter(transient.values()))))
            plan.transitions.append((mid, "failed", {"error": detail, "recipients_result": per_recipient}, detail))
            plan.finished.append((message, "failed"))
    if plan.retry_ids:
        plan.retry_delay_ms = retry_delay_ms(min(retry_attempts))
    return plan
