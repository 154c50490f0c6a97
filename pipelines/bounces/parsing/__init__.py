"""Bounce and complaint reports → `Bounce` records.

One module per report format or provider style, all producing the same `Bounce`:

- `arf` — RFC 5965 complaint reports (Gmail, Outlook/JMRP, Yahoo feedback loops);
- `rfc3464` — standard delivery status notifications (multipart/report with
  message/delivery-status), which is what Gmail and Outlook.com send; their quirks
  (Gmail's multi-line `550-5.1.1` diagnostics, Outlook's RESOLVER codes) are tidied in
  `classify.clean_diagnostic`;
- `microsoft` — Exchange-style text-only NDRs ("Remote Server returned '550 5.1.1 …'");
- `gmail` — Gmail's older text-only "Delivery to the following recipient failed";
- `ses` — Amazon SES bounce events mailed as JSON by an SNS email subscription;
- `mta_texts` — every other text-only style a mail server writes (qmail, Exim, Postfix,
  sendmail, SMTP32, GroupWise, old Exchange, Yahoo, …), the addresses found by
  `flufl.bounce`;
- `notices` — what none of those reads: a notice's embedded DSN fields, else the
  addresses its own words name (DragonFly, KDDI, EZweb, m-FILTER, Zoho, WorkMail, …).

`parse_report` tries them in that order; None means "not a report we understand" (the
caller keeps the raw report and counts it, never drops it). The message the report is
about comes from the VERP return path when the caller knows it, else from our Message-ID
or return path quoted inside the report. What a report names is believed only for the
recipients of that message (`matching.match`); `classify` says what each failure means."""

from __future__ import annotations

import dataclasses
import email
import email.policy
import re
from email.message import EmailMessage

from pipelines.bounces.parsing import arf, gmail, microsoft, mta_texts, notices, rfc3464, ses
from pipelines.bounces.parsing.matching import Matched, match, sent_to
from pipelines.bounces.parsing.model import Bounce
from pipelines.bounces.parsing.text_reports import first_text

__all__ = ["Bounce", "Matched", "Report", "parse_report", "find_message_id", "match", "sent_to"]

_OUR_MESSAGE_ID = re.compile(r"(?:bounce\+|<)(msg_[0-9a-f]{32})[@>]")
PARSERS = (arf.parse, rfc3464.parse, ses.parse, microsoft.parse, gmail.parse)


@dataclasses.dataclass(frozen=True)
class Report:
    bounces: list[Bounce]     # as the report names them (matching.match decides whom they bounce)
    message_id: str | None
    style: str                # the format: arf, rfc3464, outlook, gmail, or a flufl.bounce detector's name


def find_message_id(text: str) -> str | None:
    match_ = _OUR_MESSAGE_ID.search(text)
    return match_.group(1) if match_ else None


# a whole delivery report pasted into a text notice (OCN forwards its relays' Postfix reports
# so): from its first header line to the end
_PASTED_REPORT = re.compile(r"^(?:From MAILER-DAEMON[^\n]*\n)?Return-Path:[^\n]*\n(?:[\w-]+:.*\n(?:[ \t].*\n)*)*?"
                            r"Content-Type: multipart/report;[^\n]*(?:\n[ \t][^\n]*)*report-type=delivery-status",
                            re.I | re.M)


def _forwarded_report(msg: EmailMessage) -> tuple[str, list[Bounce]] | None:
    """The failures of a delivery report a notice quotes whole as its text (not as an
    attachment): read like any report, once (a pasted report inside it is not looked for)."""
    text = first_text(msg)
    found = _PASTED_REPORT.search(text)
    if not found:
        return None
    inner = email.message_from_string(text[found.start():], policy=email.policy.default)
    report = next((f for f in (parser(inner) for parser in PARSERS) if f), None)
    return ("forwarded-" + report[0], report[1]) if report else None


def parse_report(raw: bytes, *, verp_message_id: str | None = None) -> Report | None:
    msg: EmailMessage = email.message_from_bytes(raw, policy=email.policy.default)
    found = next((f for f in (parser(msg) for parser in PARSERS) if f), None)
    if not found and rfc3464.says_delivered(msg):
        # a DSN that names only successes (delivered, relayed, 2.x.x): understood, and no bounce;
        # nothing is guessed from its text
        found = ("rfc3464-success", [])
    found = found or mta_texts.parse_raw(raw, msg) or _forwarded_report(msg) or notices.parse(msg)
    if not found:
        return None
    style, bounces = found
    return Report(bounces, verp_message_id or find_message_id(raw.decode("latin-1")), style)
