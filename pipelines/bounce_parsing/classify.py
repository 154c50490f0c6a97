"""Permanent, transient or undetermined — from the enhanced status code (RFC 3463: class
5 permanent, 4 transient), else from an SMTP code or enhanced code inside the diagnostic
text, else from well-known phrases; with nothing to go on, undetermined."""

from __future__ import annotations

import re

from .model import PERMANENT, TRANSIENT, UNDETERMINED

ENHANCED = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")
BASIC = re.compile(r"(?<![\d.])([245])\d\d(?=[\s\-:;]|$)")
_PERMANENT_WORDS = ("user unknown", "unknown user", "does not exist", "no such user",
                    "no such mailbox", "mailbox unavailable", "recipient not found",
                    "recipientnotfound", "recipnotfound", "invalid recipient",
                    "address rejected", "account has been disabled", "doesn't have a")
_TRANSIENT_WORDS = ("mailbox full", "over quota", "quota exceeded", "try again later",
                    "temporarily", "greylist", "deferred")


def status_from(status: str, diagnostic: str) -> str:
    """The enhanced status, taken from the text when the field is missing; a bare SMTP
    code gives its class (`554` → `5.0.0`)."""
    for text in (status, diagnostic):
        match = ENHANCED.search(text or "")
        if match:
            return ".".join(match.groups())
    match = BASIC.search(diagnostic or "")
    return f"{match.group(1)}.0.0" if match else ""


def classify(status: str, diagnostic: str = "", action: str = "") -> str:
    if action.lower() == "delayed":
        return TRANSIENT
    code = status_from(status, diagnostic)
    if code.startswith("5"):
        return PERMANENT
    if code.startswith("4"):
        return TRANSIENT
    lowered = (diagnostic or "").lower()
    if any(w in lowered for w in _PERMANENT_WORDS):
        return PERMANENT
    if any(w in lowered for w in _TRANSIENT_WORDS):
        return TRANSIENT
    return UNDETERMINED


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
