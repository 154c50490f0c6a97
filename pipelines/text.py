"""Small text transformations with a reason to exist on their own."""

from __future__ import annotations

import html
import re

_TAG = re.compile(r"<[^>]*>")
_WS = re.compile(r"\s+")
_BLOCK_END = re.compile(r"(?i)</(p|div|h[1-6]|li|tr|table)>|<br\s*/?>")
_SCRIPT_STYLE = re.compile(r"(?is)<(script|style|head)[^>]*>.*?</\1>")


def clean_subject(subject: str) -> str:
    """Rule 7: HTML tags stripped; CR/LF folded so nothing can inject a header."""
    return _WS.sub(" ", html.unescape(_TAG.sub("", subject))).strip()


def html_to_text(markup: str) -> str:
    """A readable plain-text alternative for an HTML-only message."""
    text = _SCRIPT_STYLE.sub("", markup)
    text = _BLOCK_END.sub("\n", text)
    text = html.unescape(_TAG.sub("", text))
    lines = [_WS.sub(" ", line).strip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"
