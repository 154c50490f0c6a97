"""What to do with the SMTP outcomes of one send attempt: which messages are delivered,
bounced, retried later or given up on, and what that emits (events, bounce records,
batch and analytics counts). Plain values in, a plan out; the send workflow
(pipelines/workflows/send_chunk.py) applies it in a handful of bulk writes.

Per message, over its recipients (a message to several addresses is one SMTP
transaction, and the server answers each RCPT on its own):
- a permanently refused recipient (5xx) → a bounce at once, never tried again (refused
  here, `local` — e.g. a non-ASCII local part and no SMTPUTF8 — never tried again either,
  but no bounce: no receiver refused it)
- a transiently refused recipient (4xx,
  or no connection at all)              → tried again on the SMTP retry schedule
                                          (pipelines/messages/retry_schedule.py) until the retry
                                          lifetime, counted from the first deferral, is
                                          spent; the message stays `queued` meanwhile, and
                                          a retry goes only to the recipients still owed
                                          (`accepted_recipients` and `refused_recipients`
                                          on the message are settled and never sent again)
- once every recipient is settled (or the lifetime is spent): any recipient accepted in
  any attempt → `delivered` (via `sent`), email.sent + email.delivered; otherwise any
  refused by a receiver → `bounced`; otherwise (refused here, or only transient
  refusals to the end) → `failed`, with the reason.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Mapping

from pipelines.audience.recipients import envelope
from pipelines.core.clock import iso, parse_iso, utcnow
from pipelines.messages import deliverability, retry_schedule
from pipelines.messages.delivery_status import Transition, fail, forward, retry
from pipelines.messages.labels import event_labels
from pipelines.messages.mail_streams import MARKETING_KINDS

DEFAULT_LIFETIME_SECONDS = 5 * 24 * 3600


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the next hop said. `code` 250 is accepted; 4xx (or 0: no answer) transient;
    5xx permanent. `local`: decided here, not by a receiver (so a permanent one is a
    failure of ours to send, not a bounce)."""
    code: int
    text: str
    local: bool = False

    @property
    def accepted(self) -> bool:
        return 200 <= self.code < 300

    @property
    def transient(self) -> bool:
        return 400 <= self.code < 500 or self.code == 0

    @property
    def permanent(self) -> bool:
        return self.code >= 500


def unexpected(recipients: list[str], error: BaseException) -> dict[str, Outcome]:
    """An error nobody foresaw, as a transient outcome per recipient (retried on the
    schedule; its reason lands in the message's history)."""
    why = f"unexpected error while sending: {type(error).__name__}: {error}"
    return {r: Outcome(0, why, local=True) for r in recipients}


@dataclasses.dataclass
class OutcomePlan:
    transitions: list[Transition] = dataclasses.field(default_factory=list)  # the final moves
    events: list = dataclasses.field(default_factory=list)        # outbox documents
    finished: list = dataclasses.field(default_factory=list)      # (message, final outcome)
    retry_ids: list = dataclasses.field(default_factory=list)
    retry_notes: dict = dataclasses.field(default_factory=dict)
    # message id → fields the deferral sets: recipients settled so far, `deferred_since`
    retry_progress: dict = dataclasses.field(default_factory=dict)
    next_attempts: dict = dataclasses.field(default_factory=dict)  # message id → retry_schedule.NextAttempt
    bounces: list = dataclasses.field(default_factory=list)       # synchronous 5xx, per recipient
    analytics: dict = dataclasses.field(default_factory=dict)     # {(workspace_id, day): Counter}
    # per destination domain (pipelines/messages/deliverability.py): {(workspace_id, day, domain): Counter}
    domains: dict = dataclasses.field(default_factory=dict)

    def retries_by_broker_delay(self) -> dict[int, list[str]]:
        """The retries that ride the broker, grouped by their delay in ms."""
        groups: dict[int, list[str]] = {}
        for mid in self.retry_ids:
            following = self.next_attempts[mid]
            if following.via_broker:
                groups.setdefault(int(following.delay_seconds * 1000), []).append(mid)
        return groups

    def retry_transitions(self, claims: Mapping[str, tuple[str, str]], now: dt.datetime,
                          handed_to: Mapping[str, Mapping] | None = None) -> list[Transition]:
        """The retries back to `queued` under their claims (message id → the status it
        is held in and the claim's token; delivery_status.retry); `handed_to`: message id →
        the born claim of the job its retry rides the broker in."""
        due, handed_to = self.retries_in_store(now), handed_to or {}
        return [retry(mid, claims[mid][1], self.retry_notes.get(mid), progress=self.retry_progress.get(mid),
                      next_attempt_at=due.get(mid, ""), current=claims[mid][0], handed_to=handed_to.get(mid))
                for mid in self.retry_ids]

    def retries_in_store(self, now: dt.datetime) -> dict[str, str]:
        """The retries that wait in the store: message id → when it is due."""
        return {mid: iso(now + dt.timedelta(seconds=following.delay_seconds))
                for mid, following in self.next_attempts.items() if not following.via_broker}


def _event(message: dict, event: str, data: dict, at: str) -> dict:
    return {
        "_id": f"{message['_id']}:{event}",
        "workspace_id": message["workspace_id"],
        "event": event,
        "data": {"message_id": message["_id"], "to": message["to"], "subject": message["subject"],
                 **({"campaign_id": message["campaign_id"]} if message.get("campaign_id") else {}),
                 **({"batch_id": message["batch_id"]} if message.get("batch_id") else {}),
                 **event_labels(message), **data},
        "timestamp": at,
        "dispatched": False,
    }


def _count(plan: OutcomePlan, message: dict, at: str, **fields: int) -> None:
    counter = plan.analytics.setdefault((message["workspace_id"], at[:10]), Counter())
    counter.update(fields)


def _send_kind(message: dict) -> str:
    """Analytics: a send is a message the receiving server gave a final answer (accepted
    or refused), counted as a campaign send (automation emails too: marketing mail) or an API send."""
    return "campaign_sends" if message.get("kind") in MARKETING_KINDS else "api_sends"


def _line(outcome: Outcome) -> str:
    return f"{outcome.code} {outcome.text}".strip()


def _span(seconds: float) -> str:
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


@dataclasses.dataclass(frozen=True)
class _Attempt:
    """One message's attempt, read: its recipients by outcome, what is settled so far,
    and, while some recipient is owed, the next attempt (None once the lifetime is spent,
    `gave_up` then saying so)."""
    message: dict
    outcomes: dict[str, Outcome]
    now: dt.datetime
    now_accepted: list[str]
    permanent: dict[str, Outcome]
    transient: dict[str, Outcome]
    settled: dict
    following: retry_schedule.NextAttempt | None
    gave_up: str | None

    @classmethod
    def of(cls, message: dict, outcomes: dict[str, Outcome], now: dt.datetime, lifetime_seconds: float,
           scale: float) -> _Attempt:
        attempt = int(message.get("attempts") or 0)
        now_accepted = [r for r, o in outcomes.items() if o.accepted]
        permanent = {r: o for r, o in outcomes.items() if o.permanent}
        transient = {r: o for r, o in outcomes.items() if not o.accepted and not o.permanent}
        settled = {"accepted_recipients": [*message.get("accepted_recipients", []), *now_accepted],
                   "refused_recipients": [*message.get("refused_recipients", []), *permanent]}
        since = message.get("deferred_since")
        elapsed = (now - parse_iso(since)).total_seconds() if since else 0.0
        following = retry_schedule.SMTP.after_failure(attempt + 1, scale, elapsed_seconds=elapsed,
                                                      lifetime_seconds=lifetime_seconds) if transient else None
        gave_up = None
        if transient and following is None:
            gave_up = (f"gave up after {attempt + 1} attempts over {_span(elapsed)}: "
                       f"{_line(next(iter(transient.values())))}")
        return cls(message, outcomes, now, now_accepted, permanent, transient, settled, following, gave_up)

    @property
    def mid(self) -> str:
        return self.message["_id"]

    @property
    def per_recipient(self) -> dict:
        return {r: {"code": o.code, "text": o.text} for r, o in self.outcomes.items()}

    @property
    def refused_by_receiver(self) -> list[Outcome]:
        return [o for o in self.permanent.values() if not o.local]

    def verdict(self) -> str:
        """retry, delivered, bounced or failed (see the module's docstring)."""
        if self.following is not None:
            return "retry"
        if self.settled["accepted_recipients"]:
            return "delivered"
        return "bounced" if not self.gave_up and self.refused_by_receiver else "failed"


# The SMTP attempts a message keeps (`smtp_attempts`, GET /email/:id's timeline): the
# last ones, each reply's text cut to this many characters.
MAX_ATTEMPTS_KEPT = 20
MAX_REPLY_CHARS = 500


def _reply(attempt: _Attempt, verdict: str) -> Outcome | None:
    """The reply that decided this attempt: a transient one for a deferral, an accepting
    one for a delivery, a refusal for a bounce or a failure."""
    by_verdict = {"retry": list(attempt.transient.values()), "delivered": [attempt.outcomes[r] for r in
                                                                         attempt.now_accepted],
                  "bounced": attempt.refused_by_receiver,
                  "failed": [*attempt.permanent.values(), *attempt.transient.values()]}
    chosen = by_verdict[verdict] or list(attempt.outcomes.values())
    return chosen[0] if chosen else None


def attempts_kept(attempt: _Attempt, verdict: str, at: str, rendered_at: str | None) -> dict:
    """`smtp_attempts` as this attempt leaves it (nothing when no recipient was tried: an
    earlier attempt settled them all): the ones before, then this one's reply code and
    text, who it went to, what it meant and, for a deferral, when the next one is due."""
    reply = _reply(attempt, verdict)
    if reply is None:
        return {}
    entry = {"at": at, "code": reply.code, "text": reply.text[:MAX_REPLY_CHARS],
             "outcome": "deferred" if verdict == "retry" else verdict,
             "recipients": {r: o.code for r, o in attempt.outcomes.items()}}
    if rendered_at:
        entry["rendered_at"] = rendered_at
    if verdict == "retry" and attempt.following is not None:
        entry["next_attempt_at"] = iso(attempt.now + dt.timedelta(seconds=attempt.following.delay_seconds))
    return {"smtp_attempts": [*(attempt.message.get("smtp_attempts") or []), entry][-MAX_ATTEMPTS_KEPT:]}


def _plan_retry(plan: OutcomePlan, attempt: _Attempt, at: str, rendered_at: str | None = None) -> None:
    mid, since = attempt.mid, attempt.message.get("deferred_since")
    plan.retry_ids.append(mid)
    plan.next_attempts[mid] = attempt.following
    plan.retry_notes[mid] = _line(next(iter(attempt.transient.values())))
    progress = {} if since else {"deferred_since": iso(attempt.now)}
    if attempt.now_accepted or attempt.permanent:
        owed = f"{len(attempt.transient)} of {len(envelope(attempt.message))}"
        plan.retry_notes[mid] += f" ({owed} recipients still owed)"
        progress.update(attempt.settled)
    progress.update(attempts_kept(attempt, "retry", at, rendered_at))
    if progress:
        plan.retry_progress[mid] = progress


def _plan_delivered(plan: OutcomePlan, attempt: _Attempt, at: str, rendered_at: str | None = None) -> None:
    message, gave_up = attempt.message, attempt.gave_up
    response = (_line(attempt.outcomes[attempt.now_accepted[0]]) if attempt.now_accepted
                else "250 accepted in an earlier attempt")
    extra = {"smtp_response": response, "recipients_result": attempt.per_recipient, **attempt.settled,
             **attempts_kept(attempt, "delivered", at, rendered_at),
             **({"undelivered_recipients": list(attempt.transient), "error": gave_up} if gave_up else {})}
    plan.transitions.append(forward(attempt.mid, "delivered", extra, gave_up or response, via=("sent",)))
    plan.events.append(_event(message, "email.sent", {"sent_at": at}, at))
    plan.events.append(_event(message, "email.delivered", {"smtp_response": response}, at))
    plan.finished.append((message, "delivered"))
    _count(plan, message, at, sends=1, delivered=1, **{_send_kind(message): 1})


def _plan_bounced(plan: OutcomePlan, attempt: _Attempt, at: str, rendered_at: str | None = None) -> None:
    detail = _line(attempt.refused_by_receiver[0])
    plan.transitions.append(forward(attempt.mid, "bounced", {"smtp_response": detail,
                                                             "recipients_result": attempt.per_recipient,
                                                             **attempt.settled,
                                                             **attempts_kept(attempt, "bounced", at, rendered_at)},
                                    detail))
    plan.finished.append((attempt.message, "bounced"))
    _count(plan, attempt.message, at, sends=1, bounces=1, **{_send_kind(attempt.message): 1})


def _plan_failed(plan: OutcomePlan, attempt: _Attempt, at: str, rendered_at: str | None = None) -> None:
    """Given up (the lifetime spent), or refused here for good (e.g. SMTPUTF8 needed and
    not offered)."""
    why = attempt.gave_up or (_line(next(iter(attempt.permanent.values()))) if attempt.permanent
                              else "no recipient left to send to")
    plan.transitions.append(forward(attempt.mid, "failed", {"error": why, "recipients_result": attempt.per_recipient,
                                                            **attempt.settled,
                                                            **attempts_kept(attempt, "failed", at, rendered_at)}, why))
    plan.finished.append((attempt.message, "failed"))


_PLAN = {"retry": _plan_retry, "delivered": _plan_delivered, "bounced": _plan_bounced, "failed": _plan_failed}


def plan_outcomes(results: list[tuple[dict, dict[str, Outcome] | None]], *, now: dt.datetime | None = None,
                  lifetime_seconds: float = DEFAULT_LIFETIME_SECONDS, scale: float = 1.0,
                  rendered_at: Mapping[str, str] | None = None) -> OutcomePlan:
    """`results` pairs each claimed message (its `attempts` so far, `deferred_since`) with
    its outcomes per recipient, or None when it had no rendered MIME. `scale` multiplies
    the retry waits (tests); `lifetime_seconds` bounds retrying from the first deferral.
    `rendered_at`: when each message's MIME was rendered, kept with its attempt."""
    rendered_at = rendered_at or {}
    plan = OutcomePlan()
    now = now or utcnow()
    at = iso(now)  # one timestamp for the attempt's events and counts
    for message, outcomes in results:
        if outcomes is None:
            plan.transitions.append(fail(message["_id"], "rendered message missing"))
            plan.finished.append((message, "failed"))
            continue
        attempt = _Attempt.of(message, outcomes, now, lifetime_seconds, scale)
        deliverability.count_attempt(plan.domains, message["workspace_id"], at, outcomes)
        plan.bounces += [{"message": message, "email": recipient, "code": outcome.code, "text": outcome.text}
                         for recipient, outcome in attempt.permanent.items() if not outcome.local]
        _PLAN[attempt.verdict()](plan, attempt, at, rendered_at.get(message["_id"]))
    return plan
