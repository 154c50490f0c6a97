"""Bounce and complaint reports → `Bounce` records.

One module per report format or provider style, all producing the same `Bounce`:

- `arf` — RFC 5965 complaint reports (Gmail, Outlook/JMRP, Yahoo feedback loops);
- `rfc3464` — standard delivery status notifications (multipart/report with
  message/delivery-status), which is what Gmail and Outlook.com send; their quirks
  (Gmail's multi-line `550-5.1.1` diagnostics, Outlook's RESOLVER codes) are tidied in
  `classify.clean_diagnostic`;
- `microsoft` — Exchange-style text-only NDRs ("Remote Server returned '550 5.1.1 …'");
- `yahoo` — Yahoo's qmail-style "Failure Notice" texts;
- `gmail` — Gmail's older text-only "Delivery to the following recipient failed".

`parse_report` tries them in that order; None means "not a report we understand" (the
caller keeps the raw report and counts it, never drops it). The message the report is
about comes from the VERP return path when the caller knows it, else from our Message-ID
or return path quoted inside the report."""

from __future__ import annotations

import dataclasses
import email
import email.policy
import re
from email.message import EmailMessage

from .model import Bounce
from . import arf, gmail, isp, microsoft, rfc3464, yahoo

__all__ = ["Bounce", "Report", "parse_report", "find_message_id"]

_OUR_MESSAGE_ID = re.compile(r"(?:bounce\+|<)(msg_[0-9a-f]{32})[@>]")
PARSERS = (arf.parse, rfc3464.parse, microsoft.parse, yahoo.parse, gmail.parse)


@dataclasses.dataclass(frozen=True)
class Report:
    bounces: list[Bounce]
    message_id: str | None
    style: str


def find_message_id(text: str) -> str | None:
    match = _OUR_MESSAGE_ID.search(text)
    return match.group(1) if match else None


def parse_report(raw: bytes, *, verp_message_id: str | None = None) -> Report | None:
    msg: EmailMessage = email.message_from_bytes(raw, policy=email.policy.default)
    for parser in PARSERS:
        found = parser(msg)
        if found:
            style, bounces = found
            bounces = [isp.with_isp(b) for b in bounces]
            message_id = verp_message_id or find_message_id(raw.decode("latin-1"))
            return Report(bounces, message_id, style)
    return None
