"""A received message read into a JSON-ready ParsedInbound (pipelines/core/documents.py),
and the messages to refuse at SMTP time. Pure: bytes in, values out; never raises.

    parse_inbound(raw)  -> ParsedInbound     whatever the bytes; what was wrong in `problems`
    refusal_for(raw)    -> InboundRefusal | None   hostile structure: too many headers,
                                                   nesting too deep, too many parts

The message is read with the standard library's compat32 parser, which accepts anything
(bare LF, 8-bit without a charset, broken MIME) and records defects instead of failing."""

from __future__ import annotations

import email.parser
import email.policy
import re
from email.message import Message

from pipelines.core.documents import ParsedInbound
from pipelines.inbound.auto_replies import is_automatic
from pipelines.inbound.body_parts import bodies, walk
from pipelines.inbound.header_values import addresses, date_iso, decode_value, first_message_id, message_ids
from pipelines.inbound.html_view import MAX_HTML_NESTING, safe_html, too_deep
from pipelines.inbound.replies import extract_reply
from pipelines.templates.text import header_text

MAX_HEADERS = 1_000  # header fields of the message itself; real mail has < 100 (long Received chains included)
MAX_NESTING = 20     # multipart levels; real mail rarely passes 5
MAX_PARTS = 500      # MIME parts, containers included
DEFAULT_INLINE_ATTACHMENT_BYTES = 256 * 1024
_HEADER_START = re.compile(rb"^[^ \t\r\n]", re.MULTILINE)
_HEADER_END = re.compile(rb"\r?\n\r?\n")
_FOLD = re.compile(r"\r?\n(?=[ \t])")
_DEFECT_WORDS = re.compile(r"(?<!^)(?=[A-Z][a-z])")


class InboundRefusal(Exception):
    """A message refused while the sender is still connected: `code` and `text` are the SMTP reply."""

    code: int   # 552 (too much of something) or 554 (unreadable structure)
    text: str   # the enhanced status code and the reason, e.g. "5.6.0 Too many header fields (5001; at most 1000)"

    def __init__(self, code: int, text: str):
        super().__init__(f"{code} {text}")
        self.code = code
        self.text = text


def _read(raw: bytes) -> Message:
    return email.parser.BytesParser(policy=email.policy.compat32).parsebytes(raw)


def _header_block(raw: bytes) -> bytes:
    end = _HEADER_END.search(raw)
    return raw[:end.start() if end else len(raw)]


def header_count(raw: bytes) -> int:
    """Header fields of the message itself, counted in the bytes (before any parsing)."""
    return len(_HEADER_START.findall(_header_block(raw)))


def is_binary(raw: bytes) -> bool:
    """NUL bytes among the headers: a file (an Outlook .msg, an archive), not an Internet message."""
    return b"\x00" in _header_block(raw)


def refusal_for(raw: bytes) -> InboundRefusal | None:
    """The SMTP reply refusing a hostile message, None for one to accept. Never raises."""
    try:
        return _refusal(raw)
    except Exception as error:  # noqa: BLE001 — whatever breaks the reader, the sender gets an answer
        return InboundRefusal(554, f"5.6.0 Message could not be read ({type(error).__name__})")


def _refusal(raw: bytes) -> InboundRefusal | None:
    if is_binary(raw):
        return InboundRefusal(554, "5.6.0 Not an Internet message: NUL bytes in the header")
    headers = header_count(raw)
    if headers > MAX_HEADERS:
        return InboundRefusal(552, f"5.6.0 Too many header fields ({headers}; at most {MAX_HEADERS})")
    try:
        parts = walk(_read(raw))
    except RecursionError:
        return InboundRefusal(554, f"5.6.0 MIME nesting too deep (at most {MAX_NESTING} levels)")
    depth = max(d for _label, d, _part in parts)
    if depth > MAX_NESTING:
        return InboundRefusal(554, f"5.6.0 MIME nesting too deep ({depth} levels; at most {MAX_NESTING})")
    if len(parts) > MAX_PARTS:
        return InboundRefusal(552, f"5.6.0 Too many MIME parts ({len(parts)}; at most {MAX_PARTS})")
    return None


def _problems(message: Message) -> list[str]:
    found = []
    for label, _depth, part in walk(message):
        for defect in part.defects:
            words = _DEFECT_WORDS.sub(" ", type(defect).__name__.removesuffix("Defect")).lower()
            found.append(f"{'message' if not label else 'part ' + label}: {words}")
    return found


def _headers(message: Message) -> list[list[str]]:
    return [[header_text(str(name)), decode_value(_FOLD.sub("", str(value)))] for name, value in message.raw_items()]


def _raw_values(message: Message, name: str) -> list[str]:
    return [_FOLD.sub("", str(v)) for k, v in message.raw_items() if str(k).lower() == name]


def parse_inbound(raw: bytes, *, max_attachment_inline_bytes: int = DEFAULT_INLINE_ATTACHMENT_BYTES) -> ParsedInbound:
    """Every field of the message, decoded and cleaned (header values never carry CR, LF
    or NUL). Never raises: what could not be read is left empty and said in `problems`
    (a body the parser cannot walk, e.g. nested past Python's recursion limit, still
    gives the header fields)."""
    try:
        return _parse(raw, max_attachment_inline_bytes)
    except Exception as error:  # noqa: BLE001 — the contract: any input gives a result
        problem = f"message body could not be read: {type(error).__name__}"
    try:
        parsed = _header_fields(email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw))
    except Exception as error:  # noqa: BLE001 — as above
        parsed, problem = _empty(), f"message could not be read: {type(error).__name__}"
    parsed["problems"].append(problem)
    return parsed


def _empty() -> ParsedInbound:
    return {"from": None, "to": [], "cc": [], "reply_to": [], "subject": "", "date": None, "message_id": None,
            "in_reply_to": None, "references": [], "text": None, "html": None, "html_sanitised": None,
            "reply": None, "headers": [], "attachments": [], "auto_submitted": False, "problems": []}


def _header_fields(message: Message) -> ParsedInbound:
    """The fields read from the message's own headers; the body's left empty."""
    headers = _headers(message)
    by_name: dict[str, list[str]] = {}
    for name, value in headers:
        by_name.setdefault(name.lower(), []).append(value)

    def first(name: str) -> str | None:
        values = _raw_values(message, name)
        return values[0] if values else None

    senders = addresses(_raw_values(message, "from"))
    parsed = _empty()
    parsed.update({
        "from": senders[0] if senders else None,
        "to": addresses(_raw_values(message, "to")),
        "cc": addresses(_raw_values(message, "cc")),
        "reply_to": addresses(_raw_values(message, "reply-to")),
        "subject": by_name.get("subject", [""])[0],
        "date": date_iso(first("date")),
        "message_id": first_message_id(first("message-id")),
        "in_reply_to": first_message_id(first("in-reply-to")),
        "references": message_ids(first("references")),
        "headers": headers,
        "auto_submitted": is_automatic(by_name),
        "problems": _missing(by_name),
    })
    return parsed


def _parse(raw: bytes, inline_limit: int) -> ParsedInbound:
    message = _read(raw)
    parsed = _header_fields(message)
    found = bodies(message, inline_limit=inline_limit)
    text = "\n".join(found.text) if found.text else None
    html = found.html[0] if found.html else None
    parsed.update({
        "text": text, "html": html, "html_sanitised": safe_html(html),
        "reply": extract_reply(text, html),
        "attachments": found.attachments,
        "problems": _problems(message) + found.problems + parsed["problems"] + _hostile(raw, html),
    })
    return parsed


def _missing(by_name: dict[str, list[str]]) -> list[str]:
    return [f"no {name} header" for name in ("From", "Date", "Message-ID") if name.lower() not in by_name]


def _hostile(raw: bytes, html: str | None) -> list[str]:
    found = []
    if is_binary(raw):
        found.append("message: NUL bytes in the header (a file, not an Internet message)")
    if too_deep(html):
        found.append(f"HTML nested deeper than {MAX_HTML_NESTING} levels: html_sanitised is its text")
    return found
