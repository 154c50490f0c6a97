"""RFC 5965 Abuse Reporting Format: a multipart/report; report-type=feedback-report with
a human part, a message/feedback-report part (Feedback-Type, User-Agent, Version,
Original-Rcpt-To, Reporting-MTA, Source-IP, …) and the original message or its headers.
The complainant is Original-Rcpt-To, else the To of the quoted original; feedback loops
often redact both, which leaves the complaint without an address (matching.py then takes
the one recipient of the message it quotes)."""

from __future__ import annotations

from email.message import EmailMessage, Message
from email.parser import HeaderParser
from email.utils import getaddresses
from typing import cast

from pipelines.bounces.parsing.model import PERMANENT, Bounce
from pipelines.bounces.parsing.rfc3464 import address_of


def _feedback_fields(msg: EmailMessage) -> Message | None:
    for part in msg.walk():
        if part.get_content_type() != "message/feedback-report":
            continue
        payload = part.get_payload()
        if isinstance(payload, list) and payload:
            return cast(Message, payload[0])  # a message/* part's payload is messages
        text = cast(bytes, part.get_payload(decode=True) or b"")  # decoded: a leaf part's bytes
        return HeaderParser().parsestr(text.decode("latin-1"))
    return None


def _original_to(msg: EmailMessage) -> str:
    for part in msg.walk():
        content_type = part.get_content_type()
        if content_type == "message/rfc822":
            inner = part.get_payload()
            inner = inner[0] if isinstance(inner, list) else inner
            if isinstance(inner, Message) and inner.get("To"):
                return str(inner["To"])
        if content_type == "text/rfc822-headers":
            text = cast(bytes, part.get_payload(decode=True) or b"")
            headers = HeaderParser().parsestr(text.decode("latin-1"))
            if headers.get("To"):
                return str(headers["To"])
    return ""


def parse(msg: EmailMessage) -> tuple[str, list[Bounce]] | None:
    fields = _feedback_fields(msg)
    if fields is None or not fields.get("Feedback-Type"):
        return None
    email = address_of(fields.get("Original-Rcpt-To"))
    if not email:
        addresses = [a for _, a in getaddresses([_original_to(msg)]) if "@" in a]
        email = address_of(addresses[0]) if addresses else ""
    feedback_type = str(fields["Feedback-Type"]).strip().lower()
    reporter = str(fields.get("Reporting-MTA") or "")
    user_agent = str(fields.get("User-Agent") or "")
    return "arf", [Bounce(email=email, type=PERMANENT, source="arf", kind="complaint",
                          feedback_type=feedback_type, reporting_mta=reporter.split(";", 1)[-1].strip(),
                          diagnostic_code=f"complaint ({feedback_type}) reported by {user_agent or 'unknown agent'}")]
