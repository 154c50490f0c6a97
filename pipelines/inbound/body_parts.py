"""The parts of a received message: its text and HTML bodies and its files.

Parts are walked with an explicit stack (no recursion, however deep the nesting); an
attached message (message/rfc822) is a file, not walked into, so its body is never taken
for the message's own. Nothing is expanded: an archive is described by its name, type,
size and digest."""

from __future__ import annotations

import base64
import hashlib
import mimetypes
import re
from dataclasses import dataclass, field
from email.message import Message

from pipelines.core.documents import InboundAttachment
from pipelines.inbound.header_values import bytes_to_text, decode_value, unescape

MAX_FILENAME_CHARS = 255
_UNSAFE_FILENAME = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")
_TOKEN_TYPE = re.compile(r"^[a-z0-9!#$&^_.+-]+/[a-z0-9!#$&^_.+-]+$")


@dataclass
class Bodies:
    text: list[str] = field(default_factory=list)
    html: list[str] = field(default_factory=list)
    attachments: list[InboundAttachment] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def walk(message: Message) -> list[tuple[str, int, Message]]:
    """(label, depth, part) for every part, containers too, in order, the message itself
    first ("", 0). A label is a part's place, e.g. "1.2" (the second part of the first)."""
    found: list[tuple[str, int, Message]] = []
    stack: list[tuple[str, int, Message]] = [("", 0, message)]
    while stack:
        label, depth, part = stack.pop()
        found.append((label, depth, part))
        children = part.get_payload() if part.get_content_maintype() == "multipart" else None
        if isinstance(children, list):
            prefix = f"{label}." if label else ""
            stack.extend((f"{prefix}{n}", depth + 1, child) for n, child in reversed(list(enumerate(children, 1)))
                         if isinstance(child, Message))
    return found


def leaf_parts(message: Message) -> list[tuple[str, Message]]:
    """(label, part) for every part that is not a container; an attached message is one part."""
    return [(label or "1", part) for label, _depth, part in walk(message)
            if not isinstance(part.get_payload(), list) or part.get_content_maintype() != "multipart"]


def safe_filename(name: str | None, content_type: str) -> str:
    """A name to show and save under: decoded, the last path segment only, no control or
    reserved characters, no leading dots, at most MAX_FILENAME_CHARS; made up when none is left."""
    cleaned = decode_value(name) if name else ""
    cleaned = re.split(r"[/\\]", cleaned)[-1]
    cleaned = _UNSAFE_FILENAME.sub("_", cleaned).strip().lstrip(".").strip()
    if not cleaned:
        extension = ".eml" if content_type == "message/rfc822" else (mimetypes.guess_extension(content_type) or ".bin")
        cleaned = "attachment" + extension
    if len(cleaned) > MAX_FILENAME_CHARS:
        stem, dot, extension = cleaned.rpartition(".")
        keep = extension if dot and len(extension) <= 16 else ""
        cleaned = cleaned[:MAX_FILENAME_CHARS - len(keep) - 1].rstrip(".") + ("." + keep if keep else "")
    return cleaned


def _filename(part: Message) -> str | None:
    """The part's file name (RFC 2231 or plain); raw 8-bit in the header (as Outlook writes
    it) read as UTF-8, else Windows-1252, rather than left to compat32's replacement characters."""
    wanted = ("content-disposition", "content-type")
    clean = Message()
    for name, value in part.raw_items():
        if str(name).lower() in wanted:
            clean[str(name)] = re.sub(r"\r?\n(?=[ \t])", "", unescape(str(value)))
    try:
        return clean.get_filename()
    except (ValueError, LookupError, TypeError):
        return None


def _payload_bytes(part: Message) -> bytes:
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload()
        if isinstance(inner, list) and inner and isinstance(inner[0], Message):
            try:
                return inner[0].as_bytes()
            except (ValueError, LookupError, TypeError, UnicodeError):
                return b""
    try:
        data = part.get_payload(decode=True)
    except (ValueError, LookupError, TypeError, UnicodeError):
        data = None
    if isinstance(data, bytes):
        return data
    raw = part.get_payload()
    return raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else b""


def _is_body(part: Message, filename: str | None) -> bool:
    disposition = (part.get_content_disposition() or "inline").lower()
    return disposition != "attachment" and filename is None \
        and part.get_content_type() in ("text/plain", "text/html")


def content_type(part: Message) -> str:
    """The part's type, lower-cased; a type of other than ASCII letters, digits and
    `!#$&^_.+-` (raw 8-bit, spaces) is application/octet-stream."""
    found = part.get_content_type()
    return found if _TOKEN_TYPE.match(found) else "application/octet-stream"


def _attachment(part: Message, filename: str | None, data: bytes, inline_limit: int) -> InboundAttachment:
    kind = content_type(part)
    content_id = decode_value(part.get("Content-ID", "")).strip().strip("<>").strip() or None
    disposition = (part.get_content_disposition() or "").lower()
    if disposition not in ("attachment", "inline"):
        disposition = "inline" if content_id else "attachment"
    found: InboundAttachment = {
        "filename": safe_filename(filename, kind), "content_type": kind, "size": len(data),
        "content_id": content_id, "disposition": disposition, "sha256": hashlib.sha256(data).hexdigest()}
    if len(data) <= inline_limit:
        found["content_b64"] = base64.b64encode(data).decode("ascii")
    return found


def _body_text(label: str, part: Message, data: bytes, problems: list[str]) -> str:
    charset = part.get_content_charset()
    if charset is None and part.get("Content-Type") and "charset" in str(part.get("Content-Type")).lower():
        problems.append(f"part {label}: unreadable charset parameter")
    text, problem = bytes_to_text(data, charset)
    if problem:
        problems.append(f"part {label}: {problem}")
    return text.replace("\r\n", "\n").replace("\x00", "")


def bodies(message: Message, *, inline_limit: int) -> Bodies:
    found = Bodies()
    for label, part in leaf_parts(message):
        filename = _filename(part)
        data = _payload_bytes(part)
        if _is_body(part, filename):
            target = found.html if part.get_content_type() == "text/html" else found.text
            target.append(_body_text(label, part, data, found.problems))
        else:
            found.attachments.append(_attachment(part, filename, data, inline_limit))
    return found
