"""What a bounce or complaint does, as plain values the `bounces` (and `send`) actors apply.

| report                         | message status | contact bounced | suppression                | event            |
|--------------------------------|----------------|-----------------|----------------------------|------------------|
| permanent bounce               | bounced        | yes             | hard_bounce                | email.bounced    |
| transient, Action: failed      | bounced        | no              | soft_bounce at the 3rd counted transient bounce of the address within 7 days | email.bounced |
| transient, Action: delayed     | unchanged (the remote server is still trying) | no | as above          | email.bounced    |
| undetermined                   | bounced        | no              | none                       | email.bounced    |
| complaint (ARF `abuse`, `fraud`) | unchanged    | no              | complaint                  | email.complained |
| other ARF: not-spam, auth-failure, virus, other | unchanged | no | none | none (a log line and a metric) |
| synchronous 5xx at send time   | set by the send step's own outcome plan | if permanent | as a report of that type | email.bounced |

Which failures are permanent, and which transient ones count towards the soft-bounce rule
(`classify.SOFT_COUNTED`: not policy blocks nor refused messages, which say nothing
against the address), is pipelines/bounces/parsing/classify.py's table.

A feedback report is a complaint only when the recipient reported our mail as abuse or
fraud (phishing): `not-spam` says the opposite, `auth-failure` (RFC 6591) and `virus`
speak about our own sending (a DMARC/SPF failure, an infected message), which the
operator must see and the address has no part in; `other` says nothing.

Every id is derived from where the report came from, so applying the same report twice
writes the same documents and the same events (idempotent on redelivery)."""  # noqa: E501 (a table, a row a line)

from __future__ import annotations

import dataclasses
import uuid

from pipelines.bounces.parsing import Bounce
from pipelines.bounces.parsing.classify import SOFT_COUNTED, classify, status_from
from pipelines.bounces.parsing.isp import with_isp
from pipelines.bounces.parsing.model import PERMANENT, TRANSIENT
from pipelines.core.clock import ms_of
from pipelines.core.documents import BounceRecord

COMPLAINT_FEEDBACK = ("abuse", "fraud")          # the recipient does not want our mail
OPERATOR_FEEDBACK = ("auth-failure", "virus")    # about our sending: the operator's to act on
TRANSIENT_SUPPRESS_COUNT = 3
TRANSIENT_WINDOW_SECONDS = 7 * 24 * 3600
_NAMESPACE = uuid.UUID("6f1c9a52-6a0e-4d8e-9d59-2d7f4c1b7e10")


def bounce_id(origin: str, email: str) -> str:
    """A UUID fixed by the report (or send attempt) and the recipient."""
    return str(uuid.uuid5(_NAMESPACE, f"{origin}|{email.lower()}"))


def from_smtp_rejection(email: str, code: int, text: str) -> Bounce:
    """A 5xx answer to RCPT/DATA at send time, as a bounce, classified like a report's."""
    diagnostic = f"{code} {text}".strip()
    status = status_from("", diagnostic)
    verdict = classify(status, diagnostic, "failed")
    return with_isp(Bounce(email=email, type=verdict.type, category=verdict.category, reason=verdict.reason,
                           source="smtp", action="failed", smtp_status=status, diagnostic_code=diagnostic))


def bounce_document(bounce: Bounce, *, origin: str, workspace_id: str, message_id: str | None,
                    created_at: str) -> BounceRecord:
    return {
        "_id": bounce_id(origin, bounce.email),
        "workspace_id": workspace_id,
        "message_id": message_id or "",
        "email": bounce.email,
        "email_key": bounce.email.lower(),
        "kind": bounce.kind,
        "type": bounce.type,
        "category": bounce.category,
        "reason": bounce.reason,
        "smtp_status": bounce.smtp_status,
        "diagnostic_code": bounce.diagnostic_code,
        "isp_name": bounce.isp_name,
        "source": bounce.source,
        "action": bounce.action,
        "reporting_mta": bounce.reporting_mta,
        "feedback_type": bounce.feedback_type,
        "origin": origin,
        "created_at": created_at,
        "created_ms": ms_of(created_at),
    }


@dataclasses.dataclass(frozen=True)
class Effects:
    message_status: str | None
    mark_contact_bounced: bool
    suppress_reason: str | None
    event: str
    counters: dict


def is_complaint(bounce: Bounce) -> bool:
    """A report that suppresses its recipient as a complaint (not a bounce, not a mere notice)."""
    return bounce.kind == "complaint" and bounce.feedback_type in COMPLAINT_FEEDBACK


def is_feedback_notice(bounce: Bounce) -> bool:
    """An ARF report that records nothing against the recipient (not-spam, auth-failure, …)."""
    return bounce.kind == "complaint" and not is_complaint(bounce)


def counts_towards_soft_bounce(doc: BounceRecord) -> bool:
    return doc["kind"] == "bounce" and doc["type"] == TRANSIENT and doc.get("category") in SOFT_COUNTED


def effects_of(doc: BounceRecord, *, transient_count: int) -> Effects:
    """`transient_count`: transient bounces of this address in the window that count
    towards the soft-bounce rule (`counts_towards_soft_bounce`), this one included."""
    if doc["kind"] == "complaint":
        return Effects(None, False, "complaint", "email.complained", {"complaints": 1})
    # the send step already set the status and counted a synchronous rejection
    counters = {} if doc["source"] == "smtp" else {"bounces": 1}
    message_status = None if doc["source"] == "smtp" or doc["action"] == "delayed" else "bounced"
    if doc["type"] == PERMANENT:
        return Effects(message_status, True, "hard_bounce", "email.bounced", counters)
    soft = counts_towards_soft_bounce(doc) and transient_count >= TRANSIENT_SUPPRESS_COUNT
    return Effects(message_status, False, "soft_bounce" if soft else None, "email.bounced", counters)


def event_data(doc: BounceRecord) -> dict:
    """What a report did not say is null, as in GET /bounces (stored as "")."""
    data = {"bounce_id": doc["_id"], "message_id": doc["message_id"] or None, "email": doc["email"],
            "isp_name": doc["isp_name"] or None, "source": doc["source"]}
    if doc["kind"] == "complaint":
        return {**data, "feedback_type": doc["feedback_type"] or None}
    return {**data, "type": doc["type"], "category": doc.get("category") or None,
            "smtp_status": doc["smtp_status"] or None,
            "diagnostic_code": doc["diagnostic_code"] or None}
