"""What to do with the SMTP outcomes of one send attempt: which messages are delivered,
bounced, retried later or given up on, and which events that emits."""

from __future__ import annotations

import dataclasses

from .clock import now_iso
from .transport import Outcome

MAX_ATTEMPTS = 8
# Backoff for transient failures (4xx, connection errors); short enough to ride the broker.
RETRY_DELAYS_MS = (5_000, 15_000, 30_000, 60_000, 60_000, 60_000, 60_000, 60_000)


@dataclasses.dataclass
class OutcomePlan:
    transitions: list = dataclasses.field(default_factory=list)
    events: list = dataclasses.field(default_factory=list)
    finished_ids: list = dataclasses.field(default_factory=list)
    retry_ids: list = dataclasses.field(default_factory=list)
    retry_notes: dict = dataclasses.field(default_factory=dict)
    bounces: list = dataclasses.field(default_factory=list)
    retry_delay_ms: int = 0


def _event(message: dict, event: str, data: dict) -> dict:
    return {
        "_id": f"{message['_id']}:{event}",
        "workspace_id": message["workspace_id"],
        "event": event,
        "data": {"message_id": message["_id"], "to": message["to"], "subject": message["subject"],
                 **({"campaign_id": message["campaign_id"]} if message.get("campaign_id") else {}),
                 **data},
        "timestamp": now_iso(),
        "dispatched": False,
    }


def plan_outcomes(results: list[tuple[dict, dict[str, Outcome] | None]], attempt: int) -> OutcomePlan:
    plan = OutcomePlan()
    for message, outcomes in results:
        mid = message["_id"]
        if outcomes is None:
            plan.transitions.append((mid, "failed", {"error": "rendered message missing"}, "rendered message missing"))
            continue
        accepted = [r for r, o in outcomes.items() if o.accepted]
        permanent = {r: o for r, o in outcomes.items() if o.permanent}
        transient = {r: o for r, o in outcomes.items() if not o.accepted and not o.permanent}
        per_recipient = {r: {"code": o.code, "text": o.text} for r, o in outcomes.items()}
        if transient and attempt + 1 < MAX_ATTEMPTS and not accepted and not permanent:
            plan.retry_ids.append(mid)
            first = next(iter(transient.values()))
            plan.retry_notes[mid] = f"{first.code} {first.text}".strip()
            continue
        if accepted:
            response = f"{outcomes[accepted[0]].code} {outcomes[accepted[0]].text}"
            extra = {"smtp_response": response, "recipients_result": per_recipient}
            plan.transitions.append((mid, "sent", None, None))
            plan.transitions.append((mid, "delivered", extra, response))
            plan.events.append(_event(message, "email.sent", {"sent_at": now_iso()}))
            plan.events.append(_event(message, "email.delivered", {"smtp_response": response}))
        for recipient, outcome in permanent.items():
            plan.bounces.append({"message": message, "email": recipient, "code": outcome.code,
                                 "text": outcome.text})
        if permanent and not accepted:
            first_r, first = next(iter(permanent.items()))
            detail = f"{first.code} {first.text}"
            plan.transitions.append((mid, "bounced", {"smtp_response": detail,
                                                      "recipients_result": per_recipient}, detail))
        elif transient and not accepted and not permanent:
            detail = "gave up after %d attempts: %s" % (attempt + 1, next(iter(transient.values())).text)
            plan.transitions.append((mid, "failed", {"error": detail, "recipients_result": per_recipient}, detail))
        plan.finished_ids.append(mid)
    if plan.retry_ids:
        plan.retry_delay_ms = RETRY_DELAYS_MS[min(attempt, len(RETRY_DELAYS_MS) - 1)]
    return plan
