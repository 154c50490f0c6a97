"""Headers a caller adds to a transactional email (`headers: {name: value}`): which names
are the caller's to set, what a value may hold, and how they are written.

- A name is an RFC 5322 field name (printable ASCII without `:`, here at most
  `MAX_NAME_CHARS`); names are unique without regard to case.
- The headers Postroom writes itself (`OWNED`, and every `Content-*`, `ARC-*` and `DKIM-*`
  name) are refused, naming the header: a second From or a Content-Type of the caller's
  would change who the mail is from or how it reads.
- A value is checked as subjects are: no line break or other control character, at most
  `MAX_VALUE_CHARS` characters.
- At most `MAX_HEADERS` of them.

Written after the message's own headers, in the order given: printable ASCII as it is,
folded at spaces (a long message id stays whole on its line: In-Reply-To and References
must not become encoded words), anything else as RFC 2047 encoded words. Each is covered
by the DKIM signature (pipelines/messages/dkim.py `sign(also=...)`)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from pipelines.messages.header_encoding import encoded_words

MAX_HEADERS = 50
MAX_NAME_CHARS = 76
MAX_VALUE_CHARS = 998
LINE_CHARS = 78
_MAX_LINE = 998

OWNED = frozenset({
    "from", "to", "cc", "bcc", "subject", "date", "message-id", "dkim-signature", "list-unsubscribe",
    "list-unsubscribe-post", "list-id", "feedback-id", "mime-version", "reply-to", "sender", "return-path",
    "received", "received-spf", "authentication-results", "domainkey-signature",
})
OWNED_PREFIXES = ("content-", "arc-", "dkim-")
_FIELD_NAME = re.compile(r"[!-9;-~]+")   # RFC 5322 §2.2: printable US-ASCII but the colon
_UNSAFE_CATEGORIES = ("Cc", "Cs", "Zl", "Zp")


class HeaderRefused(ValueError):
    """`name`: the header at fault (None: the set as a whole)."""

    def __init__(self, name: str | None, message: str):
        super().__init__(message)
        self.name = name


def check_name(name: str) -> None:
    if not _FIELD_NAME.fullmatch(name) or len(name) > MAX_NAME_CHARS:
        raise HeaderRefused(name, f"{name!r} is not a header name (1 to {MAX_NAME_CHARS} printable ASCII "
                                  "characters, no space or colon)")
    lowered = name.lower()
    if lowered in OWNED or lowered.startswith(OWNED_PREFIXES):
        raise HeaderRefused(name, f"the {name} header is set by Postroom and cannot be given")


def check_value(name: str, value: str) -> None:
    if len(value) > MAX_VALUE_CHARS:
        raise HeaderRefused(name, f"the value of {name} is longer than {MAX_VALUE_CHARS} characters")
    if any(unicodedata.category(ch) in _UNSAFE_CATEGORIES for ch in value):
        raise HeaderRefused(name, f"the value of {name} must not contain line breaks or other control characters")


def checked(headers: dict[str, str]) -> list[tuple[str, str]]:
    """The headers as (name, value) pairs in the order given, or HeaderRefused."""
    if len(headers) > MAX_HEADERS:
        raise HeaderRefused(None, f"at most {MAX_HEADERS} headers")
    seen: set[str] = set()
    for name, value in headers.items():
        check_name(name)
        if name.lower() in seen:
            raise HeaderRefused(name, f"the {name} header is given twice")
        seen.add(name.lower())
        check_value(name, value)
    return [(name, value.strip()) for name, value in headers.items()]


def _fold_plain(name: str, value: str) -> str | None:
    """Printable ASCII folded at spaces into lines of 78 characters where the words allow,
    a longer word alone on its line (at most 998); None when one cannot fit even so."""
    lines: list[str] = []
    current, used = "", len(name) + 2
    for word in value.split(" "):
        if current and used + 1 + len(word) > LINE_CHARS:
            lines.append(current)
            current, used = "", 1
        gap = 1 if current else 0
        if used + gap + len(word) > _MAX_LINE:
            return None
        current = f"{current} {word}" if current else word
        used += gap + len(word)
    lines.append(current)
    return "\r\n ".join(lines)


def header_lines(headers: Sequence[Sequence[str]]) -> bytes:
    """The caller's headers as lines (CRLF): see the module docstring."""
    out = []
    for name, value in headers:
        text = " ".join(value.split())
        folded = _fold_plain(name, text) if text.isascii() and text.isprintable() and "=?" not in text else None
        if folded is None:
            folded = "\r\n ".join(encoded_words(text)) if text else ""
        out.append(f"{name}: {folded}\r\n".encode("ascii"))
    return b"".join(out)
