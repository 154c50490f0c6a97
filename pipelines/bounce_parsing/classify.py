"""What a delivery failure means for the address, from the status code the report gives.

Two answers per failure:

- `category` — why it failed, by the enhanced status code's subject (RFC 3463), else by
  the basic SMTP reply code (RFC 5321), with the diagnostic's words deciding where the
  code is vague (`x.0.x`, `550`, `554`, no code at all):

  | category       | codes                                   | means                                   |
  |----------------|-----------------------------------------|-----------------------------------------|
  | `address`      | x.1.x (not 1.7/1.8), x.2.1, x.4.4; 551, 553, 521, 556 | the mailbox or its domain does not exist or is disabled |
  | `mailbox_full` | x.2.2; 452, 552                         | the mailbox is over its quota           |
  | `message`      | x.2.3, x.3.4, x.6.x                     | this message (size, content) was refused |
  | `policy`       | x.7.x, x.1.7, x.1.8                     | the receiver refused us (spam, reputation, blocks, relaying) |
  | `system`       | x.3.x, x.4.x, x.5.x; 421, 451, 50x      | the receiving system or the way to it   |
  | `other`        | x.0.x, x.2.0, 550, 554 without telling words; no code | nothing more specific |

- `type` — the spec's `permanent | transient | undetermined`, said of the *address*:
  `permanent` only for `address` and `other` failures of class 5 (or `address` words with
  no code), which suppress it for good (`hard_bounce`); `mailbox_full`, `message`,
  `policy` and `system` are `transient` whatever their class — a 5.7.1 reputation block or
  a 5.3.4 size refusal says nothing against the address; class 4 is `transient`; an
  `other` failure with no code is `undetermined`, unless the notice calls itself
  permanent. A `delayed` DSN is always `transient`.

Only transient failures that speak about the address (`SOFT_COUNTED`) count towards the
soft-bounce rule (pipelines/bounce_effects.py): a policy block or a refused message does
not."""

from __future__ import annotations

import dataclasses
import re

from .model import PERMANENT, TRANSIENT, UNDETERMINED

ADDRESS, MAILBOX_FULL, MESSAGE, POLICY, SYSTEM, OTHER = (
    "address", "mailbox_full", "message", "policy", "system", "other")
CATEGORIES = (ADDRESS, MAILBOX_FULL, MESSAGE, POLICY, SYSTEM, OTHER)
NEVER_PERMANENT = (MAILBOX_FULL, MESSAGE, POLICY, SYSTEM)
SOFT_COUNTED = (ADDRESS, MAILBOX_FULL, SYSTEM, OTHER)

# `5.1.1`, `#5.1.1`, `(5.1.1)`; not inside an IP address or a version number
# (class 2 is success: never a failure's code)
ENHANCED = re.compile(r"(?<![\w.])([45])\.(\d{1,3})\.(\d{1,3})(?![\w]|\.\d)")
BASIC = re.compile(r"(?<![\w.#-])([45][0-5]\d)(?=[\s\-:;,]|$)")

# The enhanced codes whose subject and detail alone say why.
_BY_ENHANCED = {
    ("1", "7"): POLICY, ("1", "8"): POLICY,   # the sender's address, not the recipient's
    ("2", "1"): ADDRESS, ("2", "2"): MAILBOX_FULL, ("2", "3"): MESSAGE,
    ("3", "4"): MESSAGE, ("4", "4"): ADDRESS,   # 4.4: no route to the domain (no MX, no A)
}
_BY_SUBJECT = {"1": ADDRESS, "6": MESSAGE, "7": POLICY}
# Where the words decide, what the code says when they say nothing.
_SUBJECT_DEFAULT = {"0": OTHER, "2": OTHER, "3": SYSTEM, "4": SYSTEM, "5": SYSTEM}
_BASIC_DEFAULT = {
    "550": OTHER, "554": OTHER, "551": ADDRESS, "553": ADDRESS, "521": ADDRESS, "556": ADDRESS,
    "552": MAILBOX_FULL, "452": MAILBOX_FULL, "421": SYSTEM, "451": SYSTEM,
    "500": SYSTEM, "501": SYSTEM, "502": SYSTEM, "503": SYSTEM, "504": SYSTEM,
}

# Telling words, tried in this order (the first list that matches decides).
_WORDS = (
    (MAILBOX_FULL, ("mailbox full", "mailbox is full", "over quota", "overquota", "quota exceeded",
                    "exceeded storage", "exceeds quota", "disk quota", "insufficient storage", "quota",
                    "mailbox size limit", "not enough space", "out of storage", "mailbox is over", "is full")),
    (ADDRESS, ("user unknown", "unknown user", "does not exist", "doesn't exist", "no such user",
               "no such mailbox", "no such recipient", "mailbox unavailable", "mailbox not found",
               "recipient not found", "recipientnotfound", "recipnotfound", "invalid recipient",
               "invalid mailbox", "invalid address", "recipient address rejected", "unknown recipient",
               "unknown or illegal", "account has been disabled", "account is disabled",
               "mailbox disabled", "mailbox is disabled", "doesn't have a", "no mailbox here",
               "not a valid mailbox", "unrouteable address", "host unknown", "no such domain",
               "domain not found", "user not found", "address unknown", "unknown address",
               "unknown local part", "not our customer", "no longer active", "is inactive",
               "addressee unknown", "name is not recognized", "not listed in", "bad destination",
               "mailbox does not", "account does not", "user doesn't", "not a known user",
               "unknown mailbox", "no valid recipients", "user not known", "no matches to", "did not exactly match",
               "n'existe pas")),
    (POLICY, ("spam", "blocked", "block list", "blocklist", "blacklist", "rbl", "dnsbl", "spamhaus",
              "reputation", "unsolicited", "policy", "not allowed to send", "sender address rejected",
              "relay", "greylist", "graylist", "access denied", "authentication required",
              "not accepting mail from")),
    (MESSAGE, ("too large", "too big", "size limit", "message size", "exceeds the maximum",
               "message length", "virus", "attachment", "content rejected")),
    (SYSTEM, ("timed out", "timeout", "connection refused", "retry time", "retry timeout",
              "too many hops", "loop", "try again later", "temporarily",
              "temporary failure", "deferred", "unreachable", "network is unreachable",
              "no route to host", "expired", "not reachable", "not responding", "name service error",
              "try again", "not yet been delivered")),
)
_SAYS_PERMANENT = re.compile(r"permanent (fatal )?(error|failure)|failed permanently|permanently rejected", re.I)


@dataclasses.dataclass(frozen=True)
class Verdict:
    type: str       # permanent | transient | undetermined
    category: str   # one of CATEGORIES


def status_from(status: str, diagnostic: str = "") -> str:
    """The status a report gives: its enhanced code (the Status field first, then the
    diagnostic), else its basic SMTP reply code as written (`Status: 553` → `553`), else ""."""
    for text in (status, diagnostic):
        match = ENHANCED.search(text or "")
        if match:
            return ".".join(match.groups())
    for text in (status, diagnostic):
        match = BASIC.search(text or "")
        if match:
            return match.group(1)
    return ""


_WORD_PATTERNS = [(category, re.compile(r"(?<![a-z])(?:" + "|".join(map(re.escape, words)) + ")"))
                  for category, words in _WORDS]


def words_category(text: str) -> str | None:
    lowered = (text or "").lower()
    return next((category for category, pattern in _WORD_PATTERNS if pattern.search(lowered)), None)


def category_of(code: str, text: str) -> str:
    if "." in code:
        _, subject, detail = code.split(".")
        fixed = _BY_ENHANCED.get((subject, detail)) or _BY_SUBJECT.get(subject)
        if fixed:
            return fixed
        return words_category(text) or _SUBJECT_DEFAULT.get(subject, OTHER)
    return words_category(text) or _BASIC_DEFAULT.get(code, OTHER)


def classify(code: str, diagnostic: str = "", action: str = "", *, notice: str = "") -> Verdict:
    """`code` as `status_from` gives it; `notice`: the report's own words around the failure,
    read for "permanent error" when there is no code."""
    category = category_of(code, diagnostic)
    klass = code[:1]
    if action.lower() == "delayed" or category in NEVER_PERMANENT or klass == "4":
        return Verdict(TRANSIENT, category)
    if klass == "5" or category == ADDRESS:
        return Verdict(PERMANENT, category)
    if not code and _SAYS_PERMANENT.search(f"{diagnostic}\n{notice}"):
        return Verdict(PERMANENT, category)
    return Verdict(UNDETERMINED, category)


_TYPE_PREFIX = re.compile(r"^\s*(smtp|x-postfix|x-unix|x-local)\s*;\s*", re.I)


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
