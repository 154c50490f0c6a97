"""Helpers for text-only bounce notices (no machine-readable part)."""

from __future__ import annotations

import re
from email.message import EmailMessage

ADDRESS = re.compile(r"<?([A-Za-z0-9._%+'=-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,})>?")


def first_text(msg: EmailMessage) -> str:
    """The first text/plain part (or the whole body of a single-part message)."""
    for part in msg.walk():
        if part.get_content_type() == "text/plain" and not part.is_multipart():
            try:
                return part.get_content()
            except (LookupError, ValueError):
                return (part.get_payload(decode=True) or b"").decode("latin-1")
    return ""


def sender_of(msg: EmailMessage) -> str:
    return str(msg.get("From") or "").lower()
