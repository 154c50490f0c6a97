"""Small text transformations with a reason to exist on their own."""

from __future__ import annotations

import html
import re

_TAG = re.compile(r"<[^>]*>")
_WS = re.compile(r"\s+")
_WS_IN_LINE = re.compile(r"[^\S\n]+")
_BLOCK_END = re.compile(r"(?i)</(p|div|h[1-6]|li|tr|table)>|<br\s*/?>")
_SCRIPT_STYLE = re.compile(r"(?is)<(script|style|head)[^>]*>.*?</\1>")
_LINK = re.compile(r"""(?is)<a\s[^>]*?\bhref\s*=\s*["']([^"']*)["'][^>]*>(.*?)</a\s*>""")
# Control characters that are not whitespace (NUL, ESC, DEL, C1 such as CSI): never
# part of a header. (The whitespace ones, CR/LF among them, are folded by _WS.)
CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def header_text(text: str) -> str:
    """What of caller text may stand in a header: every run of white space — CR, LF, TAB,
    VT, FF, NEL, U+2028, U+2029 and the other Unicode spaces — becomes one space (the
    words stay apart), other control characters (NUL, ESC, DEL, C1) are dropped, a lone
    surrogate (not encodable) becomes U+FFFD, and the ends are trimmed."""
    text = _SURROGATE.sub("\ufffd", CONTROL.sub("", text))
    return _WS.sub(" ", text).strip()


def clean_subject(subject: str) -> str:
    """Rule 7: HTML tags stripped; then as any header text (`header_text`): CR/LF folded
    so nothing can inject a header, other control characters dropped."""
    return header_text(html.unescape(_TAG.sub("", subject)))


def _link_as_text(match: re.Match) -> str:
    """`<a href="U">label</a>` → `label (U)`, so a reader of the plain part can follow it;
    just the label when it already is the address, or for in-page anchors."""
    url, inner = html.unescape(match.group(1)).strip(), match.group(2)
    label = html.unescape(_TAG.sub("", inner)).strip()
    if not url or url.startswith("#") or label in (url, url.removeprefix("mailto:")):
        return inner
    return f"{inner} ({url})" if label else url


def html_to_text(markup: str) -> str:
    """A readable plain-text alternative for an HTML-only message: blocks become lines,
    links keep their address, markup goes."""
    text = _SCRIPT_STYLE.sub("", markup)
    text = _LINK.sub(_link_as_text, text)
    text = _BLOCK_END.sub("\n", text)
    text = html.unescape(_TAG.sub("", text))
    # every line break splitlines knows becomes "\n", then the rest of the whitespace is
    # folded in one pass over the whole text (a regex call per line cost more)
    text = _WS_IN_LINE.sub(" ", "\n".join(text.splitlines()))
    lines = [line.strip() for line in text.split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"
