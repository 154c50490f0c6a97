"""The body of a message with files: the multipart structure and each file's part.

    multipart/mixed                      only when some file is a plain attachment
    ├── multipart/alternative            (or text/plain alone, when there is no HTML)
    │   ├── text/plain
    │   └── multipart/related            only when some file is inline (has a content_id)
    │       ├── text/html                refers to them as cid:<content_id>
    │       └── inline files             Content-Disposition: inline, Content-ID: <…>
    └── attached files                   Content-Disposition: attachment

An inline file of a message without HTML has nothing to show it: it goes with the
attachments. Files are base64 in lines of 76 characters.

File names are written by us, never by the stdlib: its header parser decodes an encoded
word it finds inside a parameter (`=?utf-8?q?x?=.pdf` came out as `x.pdf`). Printable ASCII
without `=?`, quotes or backslashes, short enough for one line, is a quoted string; any
other name is RFC 2231 (`filename*=utf-8''…`, percent-encoded, cut into numbered
continuations of at most `_SECTION_CHARS` characters), in which no reader sees an
encoded word or a line break. The name is given as Content-Disposition's `filename` and,
for older readers, Content-Type's `name`."""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence

_CRLF = b"\r\n"
_SECTION_CHARS = 60
_QUOTABLE = re.compile(r"[ !#-\[\]-~]{1,60}")          # printable ASCII but " and \
# RFC 2231 attribute-char: CHAR except space, controls, "*", "'", "%" and the tspecials
_ATTRIBUTE_CHAR = frozenset(b"!#$&+-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ^_`abcdefghijklmnopqrstuvwxyz{|}~")


def _percent_encoded(name: str) -> list[str]:
    """Each character of the name as RFC 2231 writes it (itself, or its UTF-8 bytes as
    `%XX`): a section never ends inside a character, as readers that decode each section
    on its own would break it."""
    return ["".join(chr(b) if b in _ATTRIBUTE_CHAR else f"%{b:02X}" for b in ch.encode("utf-8")) for ch in name]


def parameter(attribute: str, value: str) -> str:
    """`; attribute=value` for a header, folded: see the module docstring."""
    if _QUOTABLE.fullmatch(value) and "=?" not in value:
        return f';\r\n {attribute}="{value}"'
    pieces = _percent_encoded(value)
    sections, current = [], "utf-8''"
    for piece in pieces:
        if len(current) + len(piece) > _SECTION_CHARS:
            sections.append(current)
            current = ""
        current += piece
    sections.append(current)
    if len(sections) == 1:
        return f";\r\n {attribute}*={sections[0]}"
    return "".join(f";\r\n {attribute}*{i}*={s}" for i, s in enumerate(sections))


def file_part(ref: dict, data: bytes, *, inline: bool) -> bytes:
    """One file as a MIME entity: its headers, a blank line, base64 lines (CRLF)."""
    filename = ref["filename"]
    headers = [f"Content-Type: {ref['content_type']}{parameter('name', filename)}",
               f"Content-Disposition: {'inline' if inline else 'attachment'}{parameter('filename', filename)}"]
    if inline:
        headers.append(f"Content-ID: <{ref['content_id']}>")
    headers.append("Content-Transfer-Encoding: base64")
    body = base64.encodebytes(data).replace(b"\n", _CRLF)
    return "\r\n".join(headers).encode("ascii") + b"\r\n\r\n" + body


def multipart(kind: bytes, boundary: bytes, entities: Sequence[bytes], params: bytes = b"") -> bytes:
    """`entities` (each its headers, blank line and body ending CRLF) as one multipart entity."""
    out = [b"Content-Type: multipart/", kind, b'; boundary="', boundary, b'"', params, b"\r\n\r\n"]
    for entity in entities:
        out += [b"--", boundary, _CRLF, entity, _CRLF]
    out += [b"--", boundary, b"--\r\n"]
    return b"".join(out)


def body_with_files(plain: bytes, html: bytes | None, files: Sequence[tuple[dict, bytes]], boundary: bytes) -> bytes:
    """The message's body entity (Content-Type onwards): `plain` and `html` are the text
    entities, `files` (reference, bytes) pairs; `boundary` ends in `==` and is cut into
    one boundary per level."""
    stem = boundary[:-2]
    inline = [(ref, data) for ref, data in files if ref.get("content_id") and html is not None]
    attached = [(ref, data) for ref, data in files if not (ref.get("content_id") and html is not None)]
    if html is not None:
        parts = [html, *(file_part(r, d, inline=True) for r, d in inline)]
        shown = multipart(b"related", stem + b"_r==", parts, b'; type="text/html"') if inline else html
        core = multipart(b"alternative", boundary, [plain, shown])
    else:
        core = plain
    if not attached:
        return core
    return multipart(b"mixed", stem + b"_m==", [core, *(file_part(r, d, inline=False) for r, d in attached)])
