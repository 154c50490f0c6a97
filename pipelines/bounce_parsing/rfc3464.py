"""RFC 3464 delivery status notifications: a multipart/report whose
message/delivery-status part has one per-message block (Reporting-MTA, …) and one block
per recipient (Final-Recipient, Action, Status, Diagnostic-Code, Remote-MTA)."""

from __future__ import annotations

from email.message import EmailMessage, Message
from email.parser import HeaderParser

from .classify import classify, clean_diagnostic, status_from
from .model import Bounce

# Actions that say the mail went through: not bounces (RFC 3464 §2.3.3).
_NOT_FAILURES = {"delivered", "relayed", "expanded"}


def delivery_status_blocks(msg: EmailMessage) -> list[Message] | None:
    for part in msg.walk():
        if part.get_content_type() != "message/delivery-status":
            continue
        payload = part.get_payload()
        if isinstance(payload, list):
            return payload
        # some senders quote-print or otherwise leave it as text: split the blocks ourselves
        text = part.get_payload(decode=True) or b""
        blocks = [b for b in text.decode("latin-1").replace("\r\n", "\n").split("\n\n") if b.strip()]
        return [HeaderParser().parsestr(b) for b in blocks]
    return None


def address_of(field: str | None) -> str:
    """`rfc822; Bob@Example.com` → `Bob@example.com`."""
    value = (field or "").split(";", 1)[-1].strip().strip("<>")
    local, at, domain = value.rpartition("@")
    return f"{local}@{domain.lower()}" if at else ""


def parse(msg: EmailMessage) -> tuple[str, list[Bounce]] | None:
    blocks = delivery_status_blocks(msg)
    if not blocks:
        return None
    per_message, recipients = blocks[0], blocks[1:]
    if per_message.get("Final-Recipient") or per_message.get("Original-Recipient"):
        per_message, recipients = Message(), blocks  # no per-message block given
    reporting = str(per_message.get("Reporting-MTA") or "").split(";", 1)[-1].strip()
    bounces = []
    for block in recipients:
        email = address_of(block.get("Final-Recipient") or block.get("Original-Recipient"))
        action = str(block.get("Action") or "").strip().lower()
        if not email or action in _NOT_FAILURES:
            continue
        diagnostic = clean_diagnostic(str(block.get("Diagnostic-Code") or ""))
        status = status_from(str(block.get("Status") or ""), diagnostic)
        remote = str(block.get("Remote-MTA") or "").split(";", 1)[-1].strip()
        remote = remote.split()[0].rstrip(".") if remote else ""
        bounces.append(Bounce(email=email, type=classify(status, diagnostic, action), source="dsn",
                              smtp_status=status, diagnostic_code=diagnostic, action=action or "failed",
                              reporting_mta=remote or reporting))
    return ("rfc3464", bounces) if bounces else None
