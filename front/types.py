"""Field types shared by request models."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, TypeAdapter
from typing_extensions import TypeAliasType

from pipelines.audience.addresses import normalize
from pipelines.core import json_text

# An RFC 2047 encoded word (`=?utf-8?q?…?=`): address parsers decode it, so in an address it
# would say something else than what was checked. Refused in addresses. (In a display name
# or a subject it is harmless text: pipelines/messages/header_encoding.py encodes such text itself,
# so it arrives as the literal characters.)
_ENCODED_WORD = re.compile(r"=\?.*\?=", re.DOTALL)


def _email(value: str) -> str:
    address = normalize(value)
    if _ENCODED_WORD.search(address.rpartition("@")[0]):
        raise ValueError("the part before the @ must not carry an encoded word (=?…?=)")
    return address


# Names no mail can go to (RFC 6761, email-validator's SPECIAL_USE_DOMAIN_NAMES): refused,
# and said in the document, so a valid-looking `a@b.test` is not a surprise; and no `=?`
# (an encoded word, refused above: a domain cannot hold one, so anywhere in the address).
_NOT_SPECIAL_USE = r"^(?![\s\S]*=\?)(?![\s\S]*\.(?:[Aa][Rr][Pp][Aa]|[Ii][Nn][Vv][Aa][Ll][Ii][Dd]|" \
                   r"[Ll][Oo][Cc][Aa][Ll]|[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]|[Oo][Nn][Ii][Oo][Nn]|[Tt][Ee][Ss][Tt])\.?$)"
EmailAddress = Annotated[str, StringConstraints(max_length=254), AfterValidator(_email),
                         Field(json_schema_extra={"format": "email", "pattern": _NOT_SPECIAL_USE})]
# Control characters (CR, LF, NUL, ESC, ...) and the Unicode line/paragraph separators
# the email library treats as line breaks: none of them belongs in a header.
_HEADER_UNSAFE_CATEGORIES = ("Cc", "Zl", "Zp")


def _display_name(value: str) -> str:
    if any(unicodedata.category(ch) in _HEADER_UNSAFE_CATEGORIES for ch in value):
        raise ValueError("must not contain line breaks or other control characters")
    return value


DisplayName = Annotated[str, StringConstraints(max_length=200), AfterValidator(_display_name),
                        Field(json_schema_extra={"pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$"},
                              description="Display name in the From header: at most 200 characters, "
                                          "no line breaks or other control characters. Text that looks "
                                          "like an encoded word (=?…?=) arrives as those characters.")]
# What parse_target accepts, as a pattern the document can carry (so a client, and a
# generator of requests, can tell a URL we take): http(s), a DNS name of at most 253
# characters (the lookahead) whose last label is not a number (IPv4 literals are accepted
# too, but not described), a port 1-65535, then printable ASCII without spaces or backslashes.
TARGET_URL_PATTERN = (r"^[hH][tT][tT][pP][sS]?://(?=[A-Za-z0-9_.-]{1,253}(?:[:/?#]|$))"
                      r"(?:[A-Za-z0-9_-]{1,63}\.)*[A-Za-z][A-Za-z0-9_-]{0,62}"
                      r"(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?"
                      r"(?:[/?#][!-\[\]-~]*)?$")
# The same without the characters that end or split a header value (", ', `, ;, ,, <, >):
# a form's redirect URL (pipelines/forms.redirect_problem).
REDIRECT_URL_PATTERN = TARGET_URL_PATTERN.replace(r"[!-\[\]-~]", r"[!#-&(-+\--:=?-\[\]-_a-~]")
Name100 = Annotated[str, StringConstraints(max_length=100)]
Id = Annotated[str, StringConstraints(min_length=1, max_length=100)]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII | re.IGNORECASE)


def _uuid(value: str) -> str:
    if not _UUID.fullmatch(value):
        raise ValueError("must be a UUID (8-4-4-4-12 hexadecimal digits)")
    return value.lower()


# The id of a resource the spec calls a UUID (contacts, lists, tags, ...): anything else is
# a malformed request (400 with its path), not an unknown resource. Compared lower-cased,
# as they are issued.
Uuid = Annotated[str, StringConstraints(max_length=36), AfterValidator(_uuid),
                 Field(json_schema_extra={"format": "uuid"})]


def json_bytes(value: Any) -> int:
    """How large a JSON value is once stored: its compact UTF-8 encoding, bytes."""
    return len(json_text.compact(value).encode())


def _at_most(max_bytes: int):
    def check(value: Any) -> Any:
        if json_bytes(value) > max_bytes:
            raise ValueError(f"larger than {max_bytes // 1024} KB once serialised")
        return value
    return AfterValidator(check)


# What a BSON document can hold: 64-bit integers (front/validation.py refuses larger ones
# anywhere in a body, which failed later in the store as a 500).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# A BSON key is a C string: a key holding NUL cannot be stored (validation refuses it).
NO_NUL = {"pattern": "^[^\\u0000]*$"}
# A free-form JSON value as the document says it (components/schemas/JsonValue): anything,
# with numbers within 64-bit integer bounds and keys without NUL (the store's limits). Used
# for the document only: values are checked by validation.parse_body, not parsed into this.
# One bounded `number`: JSON Schema cannot tell 1e30 from an integer literal, so the
# integer bound is said of every number (larger floats are in fact stored); a `not
# integer` float branch made generators draw 5.0 for integer fields, which refuse it.
JsonValue = TypeAliasType(
    "JsonValue",
    Annotated[float, Field(ge=INT64_MIN, le=INT64_MAX)] | str | bool | None | list["JsonValue"]
    | Annotated[dict[str, "JsonValue"], Field(json_schema_extra={"propertyNames": NO_NUL})])


def _free_object(value: dict) -> dict:
    return {"type": "object", "propertyNames": NO_NUL, "additionalProperties": value}


class FreeJson:
    """Documents a free-form field as `outline(value)`, where `value` is the reference to
    JsonValue: pydantic hands that reference out only while it writes the document (a
    reference written by hand names no schema it knows). The default outline is an object
    of JSON values. (A client generator that resolves references to models and enums
    only, as openapi-python-client, cannot follow it: JsonValue is a union.)"""
    def __init__(self, outline: Callable[[dict], dict] = _free_object):
        self.outline = outline

    def __get_pydantic_json_schema__(self, core_schema, handler):
        return self.outline(handler(TypeAdapter(JsonValue).core_schema))


def JsonObject(max_bytes: int, documented: FreeJson | None = None) -> Any:  # noqa: N802 - a type, used as one
    """A free-form JSON object of at most `max_bytes` serialised (bounded, so a document
    stays far below the store's 16 MB), documented as an object of JSON values or as
    `documented` says."""
    return Annotated[dict[str, Any], _at_most(max_bytes), documented or FreeJson()]


class Strict(BaseModel):
    """Base for request bodies: unknown fields are refused, so typos are caught."""
    model_config = ConfigDict(extra="forbid")


def _whole(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


# An integer as JSON Schema reads one: 209.0 is 209 (strict parsing refuses floats otherwise).
JsonInteger = Annotated[int, BeforeValidator(_whole)]
