"""MIME composition: headers and bodies into the bytes handed to SMTP."""

from __future__ import annotations

import dataclasses
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime

from .clock import utcnow
from .text import html_to_text


@dataclasses.dataclass(frozen=True)
class Envelope:
    mail_from: str              # the VERP return path
    recipients: tuple[str, ...]


def format_address(address: str, name: str | None = None) -> str:
    local, _, domain = address.rpartition("@")
    return str(Address(display_name=name or "", username=local, domain=domain))


def compose(*, message_id: str, from_address: str, from_name: str | None, to: list[str],
            subject: str, html: str | None, text: str | None, reply_to: str | None,
            id_domain: str, extra_headers: dict[str, str] | None = None) -> bytes:
    msg = EmailMessage(policy=SMTP)
    msg["Message-ID"] = f"<{message_id}@{id_domain}>"
    msg["Date"] = format_datetime(utcnow())
    msg["From"] = format_address(from_address, from_name)
    msg["To"] = ", ".join(to)
    if reply_to:
        msg["Reply-To"] = reply_to
    msg["Subject"] = subject
    for name, value in (extra_headers or {}).items():
        msg[name] = value
    plain = text if text is not None else (html_to_text(html) if html else "")
    msg.set_content(plain, subtype="plain", charset="utf-8", cte="quoted-printable")
    if html is not None:
        msg.add_alternative(html, subtype="html", charset="utf-8", cte="quoted-printable")
    return msg.as_bytes()


def verp_return_path(message_id: str, bounce_domain: str) -> str:
    """Bounces come back to an address that names the message (VERP)."""
    return f"bounce+{message_id}@{bounce_domain}"


def message_id_from_verp(address: str) -> str | None:
    local = address.split("@", 1)[0]
    if local.startswith("bounce+") and len(local) > 7:
        return local[7:]
    return None
