"""RFC 3464 delivery status notifications: a multipart/report whose
message/delivery-status part has one per-message block (Reporting-MTA, …) and one block
per recipient (Final-Recipient, Original-Recipient, Action, Status, Diagnostic-Code,
Remote-MTA). A Final-Recipient that is not an Internet address (`x400; …`) leaves the
Original-Recipient; when both are addresses both are kept, and the bounce is matched to
whichever of them the message was sent to (matching.py)."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from email.message import EmailMessage, Message
from email.parser import HeaderParser
from email.utils import getaddresses
from typing import cast

from pipelines.bounces.parsing import reasons
from pipelines.bounces.parsing.classify import (
    BASIC,
    ENHANCED,
    OTHER,
    POLICY,
    Verdict,
    classify,
    clean_diagnostic,
    is_success,
    status_from,
)
from pipelines.bounces.parsing.model import PERMANENT, TRANSIENT, UNDETERMINED, Bounce
from pipelines.bounces.parsing.text_reports import notice_text, reply_for

# Actions that say the mail went through, or would (`deliverable`: an address check,
# RFC 3464 §2.3.3 and its updates): not bounces; nor is any block with a 2.x.x status.
_NOT_FAILURES = {"delivered", "relayed", "expanded", "deliverable"}


def delivery_status_blocks(msg: EmailMessage) -> list[Message] | None:
    for part in msg.walk():
        if part.get_content_type() != "message/delivery-status":
            continue
        payload = part.get_payload()
        if isinstance(payload, list):
            return cast(list[Message], payload)  # a message/* part's payload is messages
        # some senders quote-print or otherwise leave it as text: split the blocks ourselves
        text = cast(bytes, part.get_payload(decode=True) or b"")  # decoded: a leaf part's bytes
        blocks = [b for b in text.decode("latin-1").replace("\r\n", "\n").split("\n\n") if b.strip()]
        return [HeaderParser().parsestr(b) for b in blocks]
    return None


_ADDRESS_TYPES = ("rfc822", "utf-8")  # RFC 3464, RFC 6533


def address_of(field: str | None) -> str:
    """`rfc822; Bob@Example.com` → `Bob@example.com`; "" for another address type
    (`x400; /S=bob/…`, `LOCAL; bob`) or anything that is not an address."""
    kind, semicolon, value = str(field or "").partition(";")
    if not semicolon:
        kind, value = "rfc822", kind
    value = value.strip().strip("<>").strip()
    local, at, domain = value.rpartition("@")
    if kind.strip().lower() not in _ADDRESS_TYPES or not at or not local or not domain or " " in value:
        return ""
    return f"{local}@{domain.lower()}"


def _comment(status_field: str) -> str:
    """`5.0.0 (recipient reached disk quota)` → the whole field; a bare code → ""."""
    text = " ".join(status_field.split())
    return text if " " in text else ""


def parse(msg: EmailMessage) -> tuple[str, list[Bounce]] | None:
    blocks = delivery_status_blocks(msg)
    bounces = bounces_of(blocks, notice=lambda: notice_text(msg)) if blocks else []
    if not bounces and blocks and (delivered_to := _failed_for_unaddressable(msg, blocks)):
        # Exim names a pipe or file as the Final-Recipient ("|/usr/bin/x …") when a local
        # delivery fails; the address it was delivering for is its X-Failed-Recipients
        block, failed = delivered_to
        block.replace_header("Final-Recipient", f"rfc822; {failed}")
        bounces = bounces_of(blocks, notice=lambda: notice_text(msg))
    if blocks and not any(b.get("Final-Recipient") or b.get("Original-Recipient") for b in blocks):
        # a failure report that names no recipient at all (Postfix's "Delivery report
        # unavailable"): the message it returns says whom it was for; why is not known
        bounces = [Bounce(email=address, type=UNDETERMINED, category=OTHER, reason=reasons.UNDEFINED,
                          source="dsn", action="failed") for address in _returned_to(msg)]
    return ("rfc3464", bounces) if bounces else None


def _failed_for_unaddressable(msg: EmailMessage, blocks: list[Message]) -> tuple[Message, str] | None:
    """The one recipient block whose Final-Recipient is no address, with the one address the
    notice's X-Failed-Recipients names; None unless both are single."""
    named = [b for b in blocks if b.get("Final-Recipient")]
    failed = [a for _, a in getaddresses(msg.get_all("X-Failed-Recipients") or []) if "@" in a]
    if len(named) != 1 or len(failed) != 1 or address_of(named[0].get("Final-Recipient")):
        return None
    return named[0], failed[0]


def _returned_to(msg: EmailMessage) -> list[str]:
    """The To/Cc addresses of the message a report returns (message/rfc822 or its headers)."""
    for part in msg.walk():
        kind = part.get_content_type()
        if kind == "message/rfc822" and isinstance(part.get_payload(), list) and part.get_payload():
            headers = cast(list[Message], part.get_payload())[0]
        elif kind == "text/rfc822-headers":
            text = cast(bytes, part.get_payload(decode=True) or b"")
            headers = HeaderParser().parsestr(text.decode("latin-1"))
        else:
            continue
        found = getaddresses([str(v) for v in (headers.get_all("To") or []) + (headers.get_all("Cc") or [])])
        return list(dict.fromkeys(a.lower() for _, a in found if "@" in a))
    return []


def says_delivered(msg: EmailMessage) -> bool:
    """The DSN's recipient blocks all say the mail went through (or would): 2.x.x, delivered, …"""
    named = [b for b in delivery_status_blocks(msg) or [] if b.get("Final-Recipient") or b.get("Original-Recipient")]
    return bool(named) and all((str(b.get("Action") or "").split() or [""])[0].lower() in _NOT_FAILURES
                               or is_success(str(b.get("Status") or "")) for b in named)


def blocks_in_text(text: str) -> list[Message]:
    """DSN fields written into a text part (Amazon WorkMail and others quote their own
    report that way): the blocks from the first Reporting-MTA/Final-Recipient/Action line on."""
    start = re.search(r"^(Reporting-MTA|Final-Recipient|Original-Recipient|Action):", text, re.M | re.I)
    if not start:
        return []
    blocks = [b for b in text[start.start():].replace("\r\n", "\n").split("\n\n") if b.strip()]
    return [HeaderParser().parsestr(b.strip() + "\n") for b in blocks]


_AT_DATA = re.compile(r"in reply to end of data|^\s*>>> data\s*$|after end of data", re.I | re.M)


def _line_about(address: str, text: str, everyone: list[str]) -> str:
    """The notice's own line about `address` when its DSN block gives no Diagnostic-Code
    (OpenSMTPD: `bob@example.org: 550 5.7.26 … authentication checks failed` above a bare
    `Status: 5.0.0`): the one line naming it, and no other failed address, with a reply code."""
    wanted = address.lower()
    others = [o.lower() for o in everyone if o and o.lower() != wanted]
    return next((line.strip() for line in text.splitlines()
                 if wanted in line.lower() and not any(o in line.lower() for o in others)
                 and (ENHANCED.search(line) or BASIC.search(line))), "")


def bounces_of(blocks: list[Message], *, notice=lambda: "") -> list[Bounce]:
    """`notice`: gives the report's own text; read only for a report about one recipient
    whose block says nothing but a vague status (Google's "Address not found" with a bare
    `Status: 5.0.0`): the text of a report about several could be about any of them."""
    per_message, recipients = blocks[0], blocks[1:]
    if _names_recipient(per_message):
        per_message, recipients = Message(), blocks  # no per-message block given
    report = _Report.of(per_message, [b for b in recipients if _names_recipient(b)], functools.cache(notice))
    return [bounce for bounce in (report.bounce_of(block) for block in recipients) if bounce is not None]


def _names_recipient(block: Message) -> bool:
    return bool(block.get("Final-Recipient") or block.get("Original-Recipient"))


def _first_word(value, default: str = "") -> str:
    return (str(value or "").split() or [default])[0]


@dataclasses.dataclass(frozen=True)
class _Report:
    """What every recipient block of one report is read with: the report's own text
    (`notice`, read only when needed), the addresses its blocks name, its Reporting-MTA."""
    notice: Callable[[], str]
    text: str          # the notice, when some block has no Diagnostic-Code of its own
    own_words: str     # the notice, when the report is about one recipient
    everyone: list[str]
    reporting: str

    @classmethod
    def of(cls, per_message: Message, named: list[Message], notice: Callable[[], str]) -> _Report:
        return cls(notice, notice() if any(not b.get("Diagnostic-Code") for b in named) else "",
                   notice() if len(named) == 1 else "",
                   [address_of(b.get("Final-Recipient")) or address_of(b.get("Original-Recipient")) for b in named],
                   str(per_message.get("Reporting-MTA") or "").split(";", 1)[-1].strip())

    def bounce_of(self, block: Message) -> Bounce | None:
        """The bounce a recipient block reports; None for a block about mail that went
        through (or would), or about no address."""
        final, original = address_of(block.get("Final-Recipient")), address_of(block.get("Original-Recipient"))
        action = _first_word(block.get("Action"), "failed").lower()
        status_field = str(block.get("Status") or "")
        if not (final or original) or action in _NOT_FAILURES or is_success(status_field):
            return None
        diagnostic = clean_diagnostic(str(block.get("Diagnostic-Code") or "")
                                      or _line_about(final or original, self.text, self.everyone))
        status = status_from(status_field, diagnostic)
        action = action if action == "delayed" else "failed"  # `failure`, `error`: senders' own words
        # X.400 gateways put the remote server's reply in a field of their own
        verdict = classify(status, f"{status_field} {diagnostic} {block.get('X400-Supplementary-Info') or ''}",
                           action, notice=self.own_words)
        verdict = self._at_data(verdict, status, final or original)
        remote = str(block.get("Remote-MTA") or "").split(";", 1)[-1].strip()
        return Bounce(email=final or original, original_recipient=original if final and final != original else "",
                      type=verdict.type, category=verdict.category, reason=verdict.reason,
                      source="dsn", smtp_status=status, diagnostic_code=diagnostic or _comment(status_field),
                      action=action, reporting_mta=_first_word(remote).rstrip(".") or self.reporting)

    def _at_data(self, verdict: Verdict, status: str, address: str) -> Verdict:
        """"User unknown" in answer to DATA, not to RCPT TO, under a vague or policy status
        (5.0.0, 5.7.1): the server took the recipient and then refused the message, a
        filter's words; an addressing status (5.1.1, 5.5.0 "Invalid recipient") still means unknown."""
        if verdict.reason != reasons.USERUNKNOWN or not re.fullmatch(r"[45]\.[07]\.\d+", status):
            return verdict
        about = self.notice() if len(self.everyone) == 1 else reply_for(address, self.notice(),
                                                                        [e for e in self.everyone if e != address])
        if not _AT_DATA.search(about):
            return verdict
        return Verdict(TRANSIENT if verdict.type == PERMANENT else verdict.type, POLICY, reasons.FILTERED)
