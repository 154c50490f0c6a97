"""Header values of a received message, decoded and made safe to pass on: encoded words
(RFC 2047) in any charset Python knows, raw 8-bit (UTF-8, else Windows-1252), and never a
CR, LF or NUL in what comes out (pipelines/templates/text.py `header_text`), so a value
copied into another message's header cannot add a header of its own."""

from __future__ import annotations

import email.header
import email.utils
import re
from datetime import UTC

from pipelines.core.documents import InboundAddress
from pipelines.templates.text import header_text

_SURROGATES = re.compile(r"[\udc80-\udcff]")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_MESSAGE_ID = re.compile(r"<[^<>\s]+>")
# an unquoted phrase with an @ in it before an <address>: quoted, so it parses as a name
_NAME_WITH_AT = re.compile(r'(^|,)\s*([^,"<>]*@[^,"<>]*?)\s*<([^<>]*)>')
MAX_ADDRESSES = 1000  # per header: more is hostile; the rest are dropped
FALLBACK_CHARSET = "cp1252"  # what undeclared 8-bit text that is not UTF-8 most often is
# Labels mail declares for a wider charset than the label names: decoded as the superset,
# as browsers do (the WHATWG Encoding Standard), so GBK text labelled gb2312 reads right.
SUPERSETS = {"gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "euc-cn": "gb18030",
             "ks_c_5601-1987": "cp949", "euc-kr": "cp949", "ks_c_5601": "cp949",
             "iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "iso-8859-9": "cp1254",
             "shift_jis": "cp932", "sjis": "cp932",
             "x-sjis": "cp932", "big5": "big5hkscs", "tis-620": "cp874", "iso-8859-11": "cp874",
             "windows-874": "cp874", "utf8": "utf-8", "unicode-1-1-utf-8": "utf-8"}


def bytes_to_text(data: bytes, charset: str | None = None) -> tuple[str, str | None]:
    """`data` as text in `charset`, and what went wrong (None when nothing did). Text that
    is not what its label says is read as UTF-8 when it is valid UTF-8 (the usual mistake),
    else in the label's charset with replacement characters; text with no label, or an
    unknown one, as UTF-8, else Windows-1252. A lone surrogate (which a label such as
    unicode_escape or utf-7 can make, and which neither UTF-8 nor BSON can carry) is U+FFFD."""
    text, problem = _decoded(data, charset)
    return _LONE_SURROGATE.sub("\ufffd", text), problem


def _decoded(data: bytes, charset: str | None) -> tuple[str, str | None]:
    label = charset.strip().strip('"').lower() if charset else ""
    if label in ("us-ascii", "ascii") and data.isascii():
        return data.decode("ascii"), None
    codec = SUPERSETS.get(label, label)
    problem = f"text is not valid {label}" if label else None
    if label and label not in ("us-ascii", "ascii"):
        try:
            return data.decode(codec), None
        except LookupError:
            problem, codec = f"unknown charset {label!r}", ""
        except (UnicodeDecodeError, ValueError):
            pass
    try:
        return data.decode("utf-8"), problem
    except UnicodeDecodeError:
        pass
    if codec and label not in ("us-ascii", "ascii"):
        return data.decode(codec, "replace"), problem
    return data.decode(FALLBACK_CHARSET, "replace"), problem or "8-bit text without a charset (read as Windows-1252)"


def unescape(value: str) -> str:
    """compat32 hands raw 8-bit header bytes on as surrogate escapes: read them as text."""
    if not _SURROGATES.search(value):
        return value
    return bytes_to_text(value.encode("ascii", "surrogateescape"))[0]


def decode_value(value: object) -> str:
    """A header's value as one clean line of text: encoded words decoded, unknown charsets
    and broken base64 read as well as they can be, CR/LF/NUL never kept."""
    if isinstance(value, email.header.Header):
        value = str(value)
    text = unescape(str(value))
    try:
        chunks = email.header.decode_header(text)
    except (email.errors.HeaderParseError, ValueError, LookupError):
        return header_text(text)
    out = []
    for chunk, charset in chunks:
        out.append(bytes_to_text(chunk, charset)[0] if isinstance(chunk, bytes) else chunk)
    return header_text("".join(out))


def addresses(values: list[str]) -> list[InboundAddress]:
    """Every address of the headers `values` (To, Cc…): display names decoded, the
    address itself cleaned; entries without an address are left out.

    An unquoted display name holding an @ (`ceo@bank.example <thief@evil.example>`, a
    spoofing trick) is a name, as mail programs show it: the address is the one in <>.
    (The standard library would take the name for an address of its own, first.)"""
    raw = [_NAME_WITH_AT.sub(r'\1"\2" <\3>', unescape(str(v))) for v in values]
    try:
        pairs = email.utils.getaddresses(raw)
    except (ValueError, TypeError, IndexError):
        return []
    found: list[InboundAddress] = []
    for name, address in pairs[:MAX_ADDRESSES]:
        address = header_text(address).replace(" ", "")
        if address:
            found.append({"address": address, "name": decode_value(name) or None})
    return found


def date_iso(value: str | None) -> str | None:
    """The Date header as ISO-8601 (a date without a zone taken as UTC); None unreadable."""
    if not value:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(decode_value(value))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()


def message_ids(value: str | None) -> list[str]:
    """The <id> tokens of Message-ID, In-Reply-To or References, in order."""
    return _MESSAGE_ID.findall(decode_value(value)) if value else []


def first_message_id(value: str | None) -> str | None:
    """One message id: the first <id>, else the cleaned value itself (some senders leave the <> out)."""
    if not value:
        return None
    found = message_ids(value)
    return found[0] if found else (decode_value(value) or None)
