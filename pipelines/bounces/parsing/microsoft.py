"""Exchange / Outlook-style text-only non-delivery reports:

    Delivery has failed to these recipients or groups:

    bob@contoso.com
    …
    Remote Server returned '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup'

(Outlook.com itself sends a standard RFC 3464 report, handled by `rfc3464`.)"""

from __future__ import annotations

import re
from email.message import EmailMessage

from pipelines.bounces.parsing.model import Bounce
from pipelines.bounces.parsing.text_reports import ADDRESS, first_text, isp_bounces

_FAILED_TO = re.compile(r"Delivery has failed to these recipients or groups:\s*(.+?)(?:\n\s*\n|$)", re.S | re.I)
_REMOTE = re.compile(r"Remote Server returned '([^']+)'", re.I)
_HASH_CODE = re.compile(r"#([45]\d\d [45]\.\d{1,3}\.\d{1,3}[^#]*)##")
_GENERATING = re.compile(r"Generating server:\s*(\S+)", re.I)


def parse(msg: EmailMessage) -> tuple[str, list[Bounce]] | None:
    text = first_text(msg)
    listed = _FAILED_TO.search(text)
    reply = _REMOTE.search(text) or _HASH_CODE.search(text)
    return isp_bounces("outlook", text, ADDRESS.findall(listed.group(1)), reply, action="failed", server=_GENERATING,
                       default_mta="outlook.com", isp_name="outlook") if listed else None
