"""What to do with the SMTP outcomes of one send attempt: which messages are delivered,
bounced, retried later or given up on, and what that emits (events, bounce records,
batch and analytics counts). Plain values in, a plan out; the `send` actor applies it in
a handful of bulk writes.

Per message, over its recipients (a message to several addresses is one SMTP
transaction, and the server answers each RCPT on its own):
- a permanently refused recipient (5xx) → a bounce at once, never tried again
- a transiently refused recipient (4xx,
  or no connection at all)              → tried again with backoff, up to MAX_ATTEMPTS; the
                                          message stays `queued` meanwhile, and a retry goes
                                          only to the recipients still owed
                                          (`accepted_recipients` and `refused_recipients`
                                          on the message are settled and never sent again)
- once every recipient is settled (or the attempts run out): any recipient accepted in
  any attempt → `delivered` (via `sent`), email.sent + email.delivered; otherwise every
  one refused → `bounced`; otherwise (only transient refusals, attempts exhausted) → `failed`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from .clock import now_iso
from .transport import Outcome
from .unsubscribe_headers import MARKETING_KINDS

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
    retry_progress: dict = dataclasses.field(default_factory=dict)  # message id → recipients settled so far
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


def _send_kind(message: dict) -> str:
    """Analytics: a send is a message the receiving server gave a final answer (accepted
    or refused), counted as a campaign send (automation emails too: marketing mail) or an API send."""
    return "campaign_sends" if message.get("kind") in MARKETING_KINDS else "api_sends"


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
        now_accepted = [r for r, o in outcomes.items() if o.accepted]
        permanent = {r: o for r, o in outcomes.items() if o.permanent}
        transient = {r: o for r, o in outcomes.items() if not o.accepted and not o.permanent}
        per_recipient = {r: {"code": o.code, "text": o.text} for r, o in outcomes.items()}
        for recipient, outcome in permanent.items():
            plan.bounces.append({"message": message, "email": recipient, "code": outcome.code,
                                 "text": outcome.text})
        settled = {"accepted_recipients": [*message.get("accepted_recipients", []), *now_accepted],
                   "refused_recipients": [*message.get("refused_recipients", []), *permanent]}
        accepted = settled["accepted_recipients"]
        deferred = _line(next(iter(transient.values()))) if transient else None
        if transient and attempt + 1 < MAX_ATTEMPTS:
            plan.retry_ids.append(mid)
            retry_attempts.append(attempt)
            plan.retry_notes[mid] = deferred
            if now_accepted or permanent:
                plan.retry_notes[mid] += f" ({len(transient)} of {len(message['to'])} recipients still owed)"
                plan.retry_progress[mid] = settled
            continue
        gave_up = "gave up after %d attempts: %s" % (attempt + 1, deferred) if transient else None
        if accepted:
            response = _line(outcomes[now_accepted[0]]) if now_accepted else "250 accepted in an earlier attempt"
            extra = {"smtp_response": response, "recipients_result": per_recipient, **settled,
                     **({"undelivered_recipients": list(transient), "error": gave_up} if gave_up else {})}
            plan.transitions.append((mid, "delivered", extra, gave_up or response, ("sent",)))
            plan.events.append(_event(message, "email.sent", {"sent_at": now_iso()}))
            plan.events.append(_event(message, "email.delivered", {"smtp_response": response}))
            plan.finished.append((message, "delivered"))
            _count(plan, message, sends=1, delivered=1, **{_send_kind(message): 1})
        elif not gave_up:
            detail = _line(next(iter(permanent.values())))
            plan.transitions.append((mid, "bounced", {"smtp_response": detail,
                                                      "recipients_result": per_recipient, **settled}, detail))
            plan.finished.append((message, "bounced"))
            _count(plan, message, sends=1, bounces=1, **{_send_kind(message): 1})
        else:
            plan.transitions.append((mid, "failed", {"error": gave_up, "recipients_result": per_recipient,
                                                     **settled}, gave_up))
            plan.finished.append((message, "failed"))
    if plan.retry_ids:
        plan.retry_delay_ms = retry_delay_ms(min(retry_attempts))
    return plan
