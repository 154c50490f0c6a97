"""Reading text-only bounce notices (no machine-readable part): the notice's own words,
without the copy of the original message most of them quote, and the reply a notice
gives for one address."""

from __future__ import annotations

import re
from email.message import Message
from typing import Any

from pipelines.bounces.parsing.classify import BASIC, ENHANCED, classify, clean_diagnostic, status_from, words_category
from pipelines.bounces.parsing.model import Bounce
from pipelines.templates.text import html_to_text

ADDRESS = re.compile(r"<?([A-Za-z0-9._%+'=-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,})>?")

# Where a notice starts quoting the original message (qmail, Exim, Yahoo, SMTP32, Yale,
# LLNL, Exchange, Gmail, …): nothing below it is the notice's own word.
_ORIGINAL_FOLLOWS = re.compile(
    r"^[\s>]*-*\s*(below this line is a copy of the message|this is a copy of the message"
    r"|original message follows|original message as received|original message headers"
    r"|unsent message below|the original message follows|a copy of the original message"
    r"|undelivered message follows|returned message follows|start of returned message|original message\s*-{2,}"
    r"|-+\s*original message\s*-+|message headers follow|below is a copy of the original message"
    r"|-+\s*returned message\s*-+|-+\s*unsent message follows|-+\s*original mail info"
    r"|(received|return-path):\s?\S)", re.I | re.M)
_QUOTED_PARTS = ("message/rfc822", "text/rfc822-headers", "message/delivery-status", "message/feedback-report")
MAX_DIAGNOSTIC_CHARS = 500
MAX_BLOCK_LINES = 12


def _text_of(part: Message) -> str:
    """A part's text, decoded by its charset; an unknown or lying charset is read as
    latin-1 with replacements rather than lost."""
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return str(payload or "")
    try:
        return payload.decode(part.get_content_charset() or "us-ascii")
    except (LookupError, UnicodeDecodeError):
        return payload.decode("latin-1", errors="replace")


def first_text(msg: Message) -> str:
    """The first text/plain part (or the whole body of a single-part message)."""
    for part in msg.walk():
        if part.get_content_type() == "text/plain" and not part.is_multipart():
            return _text_of(part)
    return ""


def notice_text(msg: Message) -> str:
    """The text parts of the notice itself (text/plain, else text/html made text), outside
    any quoted message, and cut where the notice starts quoting the original inline."""
    plain, html = [], []
    stack: list[Any] = [msg]  # messages (a multipart payload is a list of them)
    while stack:  # iterative: a deeply nested message must not exhaust the stack here
        part = stack.pop(0)
        content_type = part.get_content_type()
        if content_type in _QUOTED_PARTS:
            continue
        if part.is_multipart():
            payload = part.get_payload()
            stack[0:0] = payload if isinstance(payload, list) else []
        elif content_type == "text/plain":
            plain.append(_text_of(part))
        elif content_type == "text/html":
            html.append(html_to_text(_text_of(part)))
        elif part.get_content_maintype() == "multipart":  # its boundary lost (a header not folded): read it as text
            plain.append(str(part.get_payload()))
    text = "\n\n".join(plain or html).replace("\r\n", "\n")
    cut = _ORIGINAL_FOLLOWS.search(text)
    return text[:cut.start()] if cut else text


def sender_of(msg: Message) -> str:
    return str(msg.get("From") or "").lower()


def _informative(text: str) -> bool:
    return bool(ENHANCED.search(text) or BASIC.search(text) or words_category(text))


_SUCCESS_REPLY = re.compile(r"^[ \t]*(?:out:|<<<)?[ \t]*2\d\d[ -].*$", re.I | re.M)


def reply_for(address: str, notice: str, others: list[str]) -> str:
    """What the notice says about `address`: the paragraph that names it (with the next
    one when that has the reply and names no other failed address), else the notice's
    lines that carry a status code or telling words, else "". `others`: the other failed
    addresses of the same notice."""
    # a session transcript's successful replies ("Out: 250-STARTTLS", "<<< 250 2.1.5 Ok") say
    # what went right, not why the delivery failed
    notice = _SUCCESS_REPLY.sub("", notice)
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", notice) if p.strip()]
    wanted = address.lower()
    local = wanted.split("@")[0]
    found = next((i for i, p in enumerate(paragraphs) if wanted in p.lower()), None)
    if found is None:  # some notices name the mailbox only (AOL: "screenname")
        found = next((i for i, p in enumerate(paragraphs)
                      if re.search(rf"(?<![\w.]){re.escape(local)}(?![\w@])", p.lower())), None)
    if found is not None:
        block = _own_lines(paragraphs[found], wanted, [o.lower() for o in others])
        following = paragraphs[found + 1] if found + 1 < len(paragraphs) else ""
        if not _informative(block) and following and not any(o.lower() in following.lower() for o in others):
            block = f"{block}\n{following}"
        block = "\n".join(block.splitlines()[:MAX_BLOCK_LINES])
        if _informative(block):
            return _tidy(block)
    lines = [line for line in notice.splitlines() if _informative(line)]
    return _tidy("\n".join(lines[:3]))


def _own_lines(block: str, wanted: str, others: list[str]) -> str:
    """The lines of `block` about `wanted` when it lists several failed addresses with no
    blank line between them (GMX): from the line naming it to the next naming another."""
    lines = block.splitlines()
    start = next((i for i, line in enumerate(lines) if wanted in line.lower()), None)
    if start is None or not any(o in block.lower() for o in others):
        return block
    end = next((i for i in range(start + 1, len(lines))
                if any(o in lines[i].lower() for o in others) and wanted not in lines[i].lower()), len(lines))
    return "\n".join(lines[start:end])


def _tidy(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DIAGNOSTIC_CHARS else text[:MAX_DIAGNOSTIC_CHARS - 1] + "…"


def isp_bounces(isp: str, text: str, recipients: list[str], reply: re.Match | None, *, action: str,
                server: re.Pattern, default_mta: str, notice: str = "", isp_name: str = "",
                ) -> tuple[str, list[Bounce]] | None:
    """One bounce a recipient (each once) of a provider's own text notice `text`, else None;
    `reply` holds the receiving server's answer in its first group, `server` the reporting MTA's name."""
    diagnostic = clean_diagnostic(reply.group(1)) if reply else ""
    status = status_from("", diagnostic)
    verdict = classify(status, diagnostic, action, notice=notice)
    mta = server.search(text)
    bounces = [Bounce(email=r, type=verdict.type, category=verdict.category, reason=verdict.reason, source="dsn",
                      smtp_status=status, diagnostic_code=diagnostic, action=action,
                      reporting_mta=mta.group(1) if mta else default_mta,
                      isp_name=isp_name)
               for r in dict.fromkeys(recipients)]
    return (isp, bounces) if bounces else None
