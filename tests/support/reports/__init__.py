"""Bounce and complaint reports written from the RFC 3464 / RFC 5965 formats and the
shapes Gmail, Outlook (Microsoft) and Yahoo send. `$recipient`, `$message_id` and
`$return_path` are filled per test."""

from __future__ import annotations

import string
from pathlib import Path

HERE = Path(__file__).parent
NAMES = sorted(p.stem for p in HERE.glob("*.eml"))


def load(name: str, *, recipient: str, message_id: str,
         bounce_domain: str = "bounces.postroom.test") -> bytes:
    text = string.Template((HERE / f"{name}.eml").read_text()).substitute(
        recipient=recipient, message_id=message_id,
        return_path=f"bounce+{message_id}@{bounce_domain}")
    return text.replace("\r\n", "\n").replace("\n", "\r\n").encode()
