"""Header fields made from what callers write (subjects, display names), written by us.

The stdlib's `EmailMessage` parses a value it is given: `=?utf-8?q?…=0D=0A…?=` in a subject
is decoded into CR/LF and written out as header lines of their own. So caller text never
goes through it. It is normalised (`pipelines.templates.text.header_text`: no line breaks, no
control characters), then written

- as it is, folded at spaces, when it is printable ASCII without `=?` (nothing in it can
  be read as an encoded word) and every word fits a line; short subjects take this path;
- otherwise entirely as RFC 2047 encoded words (UTF-8, base64), cut at character
  boundaries, spaces kept inside the words: a reader decodes exactly the text, and a
  literal `=?…?=` a user typed arrives as those characters, never decoded a second time.
  (White space *between* encoded words is dropped by decoders, which is how separate
  words written by the stdlib lost their spaces: `שלום עולם` became `שלוםעולם`.)

Every line of a subject stays within the 78 characters RFC 5322 asks for (a plain word too
long for a line is encoded instead, since encoded words can be cut anywhere).

A display name that needs encoding is one encoded word, however long (up to the 998
characters a line may have): the stdlib's own address parser, unlike RFC 2047 §6.2 and
mail clients, keeps the white space between two encoded words of a phrase as a space, so
a name cut into several words would read back with a space inside a word there. One word
reads back the same everywhere; RFC 2047's 75-character limit per word is the price."""

from __future__ import annotations

import base64
import re

from pipelines.templates.text import header_text

LINE_CHARS = 78
# 42 bytes are 56 base64 characters: "=?utf-8?b?" + 56 + "?=" is 68, so an encoded word
# fits on a line even after "Subject: " (9 characters).
_WORD_BYTES = 42
_ATOM = re.compile(r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+(?: [A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+)*")
_FOLD = "\r\n "


# A display name as one encoded word while its line stays well inside 998 characters
# ("From: ", the word, " <address>" on the next line): 660 bytes are 880 base64 characters.
_NAME_WORD_BYTES = 660


def encoded_words(text: str, word_bytes: int = _WORD_BYTES) -> list[str]:
    """`text` as UTF-8 base64 encoded words of at most `word_bytes` bytes each (68
    characters by default), never splitting a character's bytes between two words
    (RFC 2047 §5)."""
    data = text.encode("utf-8")
    words, start = [], 0
    while start < len(data):
        end = min(start + word_bytes, len(data))
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # a UTF-8 continuation byte
            end -= 1
        words.append("=?utf-8?b?" + base64.b64encode(data[start:end]).decode("ascii") + "?=")
        start = end
    return words


def _plain(text: str) -> bool:
    """Nothing in it is header syntax or could be decoded as an encoded word."""
    return text.isascii() and text.isprintable() and "=?" not in text


def _fold(words: list[str], first_line_used: int) -> list[str] | None:
    """Plain words packed into lines of at most 78 characters; None when one word is too
    long for any line."""
    lines: list[str] = []
    current, used = "", first_line_used
    for word in words:
        if not current:
            if used + len(word) > LINE_CHARS:
                return None
            current, used = word, used + len(word)
        elif used + 1 + len(word) <= LINE_CHARS:
            current, used = f"{current} {word}", used + 1 + len(word)
        else:
            lines.append(current)
            if 1 + len(word) > LINE_CHARS:
                return None
            current, used = word, 1 + len(word)
    lines.append(current)
    return lines


def unstructured(name: str, value: str) -> bytes:
    """A header line (with CRLF) for free text such as the subject."""
    text = header_text(value)
    if not text:
        return f"{name}:\r\n".encode("ascii")
    lead = len(name) + 2
    if _plain(text):
        if lead + len(text) <= LINE_CHARS:  # the common case: one short line, written as is
            return f"{name}: {text}\r\n".encode("ascii")
        lines = _fold(text.split(" "), lead)
        if lines is not None:
            return f"{name}: {_FOLD.join(lines)}\r\n".encode("ascii")
    return f"{name}: {_FOLD.join(encoded_words(text))}\r\n".encode("ascii")


def display_name(name: str) -> str:
    """The phrase before `<address>`: atoms as they are, other printable ASCII as a quoted
    string, anything else (non-ASCII, `=?`, long) as one encoded word (see the module
    docstring). Receivers such as Python's own parser decode encoded words even inside
    quoted strings, so `=?` is never left in a quoted string either."""
    text = header_text(name)
    if _plain(text) and len(text) <= 60:
        if _ATOM.fullmatch(text):
            return text
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return _FOLD.join(encoded_words(text, _NAME_WORD_BYTES))


def mailbox(address: str, name: str | None = None) -> str:
    """`Name <address>` (or the bare address), folded before `<` when it would not fit."""
    phrase = display_name(name) if name else ""
    if not phrase:
        return address
    last_line = phrase.rsplit("\r\n", 1)[-1]
    separator = " " if len("From: ") + len(last_line) + len(address) + 3 <= LINE_CHARS else _FOLD
    return f"{phrase}{separator}<{address}>"
