"""What a delivery failure means for the address, from the remote server's words and
status code.

Each failure first gets a `reason` of the fine taxonomy in reasons.py (userunknown,
hostunknown, mailboxfull, blocked, requireptr, authfailure, expired, …): a strong
enhanced code decides alone (5.1.1, 5.2.2, 5.7.25, …); otherwise the diagnostic's words
do, read as phrase tables by reason with the refusals of *our* sending first; a vague code
(x.0.0, x.7.1, a bare 550/554) speaks only when the words say nothing. The diagnostic's own
enhanced code is believed over the DSN's Status field when the two disagree within a class
(`Status: 5.1.1` over `550 5.7.1 IP address blacklisted` is a block, not an unknown user).

Then two answers, said of the *address*:

- `category` — the reason's family: `address` (userunknown, hostunknown, hasmoved,
  notaccept, suspend), `mailbox_full`, `message` (too large, content, virus, too many
  recipients), `policy` (blocks, spam, PTR, SPF/DKIM/DMARC, TLS, relaying, rate limits,
  the recipient's filter), `system` (the receiving system, the network, expiry), `other`
  (nothing understood: onhold, undefined).
- `type` — `permanent` only for an address that does not exist or takes no mail
  (`reasons.HARD_REASONS`) with a class 5 code or none: it suppresses the address for
  good (`hard_bounce`); `undetermined` when nothing is understood; `transient` for
  everything else, and for any class 4 code or `delayed` DSN. A refusal aimed at the
  sender — however final its code ("552 Too many recipients", "554 5.0.0 Reverse DNS
  required", "550 5.2.0 Mail rejected") — never makes an address permanent.

Only transient failures that speak about the address (`SOFT_COUNTED`) count towards the
soft-bounce rule (pipelines/bounces/effects.py): a policy block or a refused message does
not."""

from __future__ import annotations

import dataclasses
import re

from pipelines.bounces.parsing import reasons
from pipelines.bounces.parsing.model import PERMANENT, TRANSIENT, UNDETERMINED

ADDRESS, MAILBOX_FULL, MESSAGE, POLICY, SYSTEM, OTHER = (
    "address", "mailbox_full", "message", "policy", "system", "other")
CATEGORIES = (ADDRESS, MAILBOX_FULL, MESSAGE, POLICY, SYSTEM, OTHER)
SOFT_COUNTED = (ADDRESS, MAILBOX_FULL, SYSTEM, OTHER)

# `5.1.1`, `#5.1.1`, `(5.1.1)`; not inside an IP address or a version number
# (class 2 is success: never a failure's code)
ENHANCED = re.compile(r"(?<![\w.])([45])\.(\d{1,3})\.(\d{1,3})(?![\w]|\.\d)")
BASIC = re.compile(r"(?<![\w.#-])([45][0-5]\d)(?=[\s\-:;,]|$)")
SUCCESS = re.compile(r"^\s*2\.\d{1,3}\.\d{1,3}\b")


@dataclasses.dataclass(frozen=True)
class Verdict:
    type: str       # permanent | transient | undetermined
    category: str   # one of CATEGORIES
    reason: str = reasons.UNDEFINED  # reasons.py's taxonomy


def status_from(status: str, diagnostic: str = "") -> str:
    """The status a report gives: its enhanced code (the diagnostic's own when it agrees in
    class with the Status field or there is none, else the Status field's), else its basic
    SMTP reply code as written (`Status: 553` → `553`), else ""."""
    given, said = ENHANCED.search(status or ""), ENHANCED.search(diagnostic or "")
    if said and (not given or said.group(1) == given.group(1)):
        return ".".join(said.groups())
    if given:
        return ".".join(given.groups())
    for text in (status, diagnostic):
        match = BASIC.search(text or "")
        if match:
            return match.group(1)
    return ""


def is_success(status: str) -> bool:
    """`2.1.5`: the report says the mail went through (or would): never a failure."""
    return bool(SUCCESS.match(status or ""))


def words_category(text: str) -> str | None:
    reason = reasons.reason_from_words(text)
    return reasons.CATEGORY_OF[reason] if reason else None


# the server refused the envelope sender (Exim's "after MAIL FROM:<…>", Postfix's "in reply to
# MAIL FROM command"): an address it calls unknown there is *ours*, not the recipient's
_SENDER_STAGE = re.compile(r"after mail from|in reply to mail from|mail from command", re.I)


_CONNECTION_STAGE = re.compile(r"after (?:ehlo|helo|initial connection)|refused to talk to me", re.I)


def _vague(code: str) -> bool:
    """x.0.0, or no code: it says a failure happened, not what kind."""
    return not code or code.endswith(".0.0")


def reason_of(code: str, text: str) -> str:
    if outranking := reasons.outranking_reason(text):
        return outranking
    by_code, strong = reasons.reason_from_code(code) if code else (None, False)
    if strong and by_code is not None:  # (a strong reading always names its reason)
        return by_code
    reason = reasons.reason_from_words(text)
    if not reason and _vague(code):
        # "451 Could not load DRD" under a 4.0.0 status: the basic reply code still says something
        basic = BASIC.search(text or "")
        reason = reasons.BASIC_REASONS.get(basic.group(1)) if basic else None
    return reason or by_code or reasons.UNDEFINED


def classify(code: str, diagnostic: str = "", action: str = "", *, notice: str = "") -> Verdict:
    """`code` as `status_from` gives it; `notice`: the report's own words around the failure,
    read when the diagnostic and a vague code (x.0.0, none) say nothing."""
    reason = reason_of(code, diagnostic)
    if reason == reasons.UNDEFINED and _vague(code) and notice:
        reason = reasons.reason_from_words(notice) or reason
    if reason == reasons.UNDEFINED and _CONNECTION_STAGE.search(f"{diagnostic} {notice}"):
        # refused before any sender or recipient was named (Exim's "after EHLO", "after initial
        # connection"): the server refuses *us*, whatever it calls it
        reason = reasons.BLOCKED
    if reason in (reasons.USERUNKNOWN, reasons.HOSTUNKNOWN) and _SENDER_STAGE.search(diagnostic or ""):
        reason = reasons.REJECTED
    category = reasons.CATEGORY_OF[reason]
    if action.lower() == "delayed" or code[:1] == "4":
        return Verdict(TRANSIENT, category, reason)
    if reason in reasons.HARD_REASONS:
        return Verdict(PERMANENT, category, reason)
    if reason in (reasons.UNDEFINED, reasons.ONHOLD):
        return Verdict(UNDETERMINED, category, reason)
    return Verdict(TRANSIENT, category, reason)


# the diagnostic-type (RFC 3464 §2.3.6): smtp, or any X- type an MTA names itself by
# (X-Postfix, X-Unix, AOL's X-Outbound-Mail-Relay): no words of the failure
_TYPE_PREFIX = re.compile(r"^\s*(smtp|x-[\w.-]+)\s*;\s*", re.I)


def clean_diagnostic(text: str) -> str:
    """`smtp; 550-5.1.1 The email account … Please try\n 550-5.1.1 double-checking …`
    (Gmail's multi-line reply) → `550 5.1.1 The email account … Please try double-checking …`."""
    text = _TYPE_PREFIX.sub("", " ".join((text or "").split()))
    first = re.match(r"([245]\d\d)[- ]([245]\.\d{1,3}\.\d{1,3}\s)?", text)
    if first and re.match(r"[245]\d\d-", text):
        code, enhanced = first.group(1), (first.group(2) or "").strip()
        repeated = rf"\s{code}[- ]" + (rf"(?:{re.escape(enhanced)}\s+)?" if enhanced else "")
        text = code + " " + text[len(code) + 1:]
        text = re.sub(repeated, " ", text)
    return " ".join(text.split())
