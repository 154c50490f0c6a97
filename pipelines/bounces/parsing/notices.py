"""Text-only notices in styles no other parser knows (DragonFly, KDDI/au, EZweb, m-FILTER,
Zoho, Amazon WorkMail, …): read the way the notices themselves are written, not per
sample.

A message is taken for a notice only when it says so — its sender is a mailer daemon
or postmaster (or empty), or its subject is a delivery failure's — and never when it is
an auto-reply. Then, in the notice's own words (text_reports.notice_text: outside the
quoted original, cut where it starts quoting it):

1. DSN fields written into the text (`Final-Recipient:`, `Action:`, `Status:`), read as
   an RFC 3464 report would be;
2. else the addresses its `X-Failed-Recipients` header lists (Exim, Google), else every
   address the notice names, less its own sender and addressee and addresses
   in links: each one's reply is the paragraph that names it (text_reports.reply_for),
   classified like any other failure.

What it names is believed only for the recipients of the message it came back for
(matching.py), as for every report."""

from __future__ import annotations

import re
from email.message import EmailMessage
from email.utils import getaddresses

from pipelines.bounces.parsing import rfc3464
from pipelines.bounces.parsing.classify import BASIC, classify, clean_diagnostic, status_from
from pipelines.bounces.parsing.model import Bounce
from pipelines.bounces.parsing.text_reports import ADDRESS, notice_text, reply_for

_DAEMON = re.compile(r"mailer-daemon|post_?master|mail ?delivery|mail administrator|^\s*<?>?\s*$", re.I)
_FAILURE_SUBJECT = re.compile(
    r"undeliver|undelivered|returned mail|failure notice|delivery (status|fail|notification|problem)"
    r"|mail delivery failed|non-?delivery|could not be delivered|mail system error|delivery error|bounce"
    r"|メールエラー|エラー", re.I)
_AUTO_REPLY = re.compile(r"out of (the )?office|auto(matic)?[- ]?(reply|response)|vacation|abwesen", re.I)
_REPLY_SUBJECT = re.compile(r"\s*(re|fwd?|aw|wg|tr|sv)\s*:", re.I)
_IN_LINK = re.compile(r"\S*://\S+")
# lines that name the original's sender, not a recipient ("MAIL FROM: bob@…", "From: …")
_SENDER_LINE = re.compile(r"^[ \t>]*(mail from|from|sender|reply-to|cc|envelope-from)\s*:.*$", re.I | re.M)
_OWN_HEADERS = ("From", "To", "Cc", "Reply-To", "Return-Path", "Sender")


def is_notice(msg: EmailMessage) -> bool:
    subject = str(msg.get("Subject") or "")
    if msg.get("X-Autoreply") or _AUTO_REPLY.search(subject):
        return False
    # Exim marks its own bounces `Auto-Submitted: auto-replied`: that header alone says
    # nothing; a daemon's sender or a failure's subject does, but a person's reply or
    # forward ("Re: Undelivered Mail …") is no notice whatever its subject says
    if _DAEMON.search(str(msg.get("From") or "")):
        return True
    return bool(_FAILURE_SUBJECT.search(subject)) and not _REPLY_SUBJECT.match(subject)


def own_addresses(msg: EmailMessage) -> set[str]:
    fields = [str(v) for name in _OWN_HEADERS for v in (msg.get_all(name) or [])]
    return {a.lower() for _, a in getaddresses(fields) if "@" in a}


def _line_for(address: str, notice: str) -> str:
    """A transcript's own line for the address (sendmail: `550 <bob@example.com>... User
    unknown`), when the notice gives each address one with a code."""
    lines = [line for line in notice.splitlines() if address.lower() in line.lower() and BASIC.search(line)]
    return " ".join(lines[-2:])


def parse(msg: EmailMessage) -> tuple[str, list[Bounce]] | None:
    if not is_notice(msg) or any(part.get_content_type() in ("message/delivery-status", "message/feedback-report")
                                 for part in msg.walk()):
        return None  # a machine-readable report that names no failure names none
    notice = notice_text(msg)
    blocks = rfc3464.blocks_in_text(notice)
    embedded = rfc3464.bounces_of(blocks) if blocks else []
    if embedded:
        return "text-dsn", embedded
    own = own_addresses(msg)
    # the notice's own list of failed recipients, where it keeps one (Exim, Google)
    failed = [a for _, a in getaddresses(msg.get_all("X-Failed-Recipients") or []) if ADDRESS.fullmatch(a)]
    named = failed or [a for a in dict.fromkeys(ADDRESS.findall(_SENDER_LINE.sub(" ", _IN_LINK.sub(" ", notice))))
                       if a.lower() not in own and not a.lower().startswith("mailer-daemon@")]
    bounces = []
    for address in named:
        others = [o for o in named if o != address]
        reply = clean_diagnostic(_line_for(address, notice) or reply_for(address, notice, others))
        status = status_from("", reply)
        verdict = classify(status, reply, "failed", notice=notice)
        local, _, domain = address.rpartition("@")
        bounces.append(Bounce(email=f"{local}@{domain.lower()}", type=verdict.type, category=verdict.category,
                              reason=verdict.reason, source="dsn", smtp_status=status, diagnostic_code=reply,
                              action="failed"))
    return ("notice", bounces) if bounces else None
