"""Field types shared by product-view and conversion tracking: money, currency codes,
product links, free-form metadata."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, WithJsonSchema

from pipelines.audience.segment_rules import ATTRIBUTE_NAME
from pipelines.core.errors import ValidationFailed

from .types import JsonObject

MAX_METADATA_BYTES = 16 * 1024
MAX_URL_CHARS = 2048
# An amount given as a string: ASCII digits, optionally a point and more digits. Python's
# Decimal also reads "1_000", "١" (Arabic-Indic one), "１２" (full width), " 1.5" and "1e3".
_AMOUNT_TEXT = re.compile(r"[0-9]+(\.[0-9]+)?", re.ASCII)
# Free-form product fields beside the known ones: how many, how deeply nested, how large.
MAX_PRODUCT_FIELDS = 50
MAX_PRODUCT_FIELD_DEPTH = 3
MAX_PRODUCT_DATA_BYTES = 16 * 1024


def _amount(value: Any) -> Decimal:
    """A JSON number as written (49.9 is 49.9, not the float's binary neighbour), or a
    numeric string of ASCII digits. The range and precision checks follow (`Amount`)."""
    if isinstance(value, str):
        if not _AMOUNT_TEXT.fullmatch(value):
            raise ValueError("a numeric string is ASCII digits with an optional decimal point (\"19.99\")")
        return Decimal(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    raise ValueError("must be a number, or a numeric string (\"19.99\")")


def _web_url(value: str) -> str:
    if not value.lower().startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value


def amount_text(value: Decimal) -> str:
    """How an amount is stored and shown: a decimal string, never a float, no exponent."""
    return format(value, "f")


# The document's form of an amount: pydantic would print its Decimal checks as keys JSON
# Schema does not know (ge, max_digits, decimal_places). Whole numbers as JSON numbers
# (JSON numbers with up to 4 decimals are accepted too, but a binary float cannot say
# "4 decimals"), decimals as strings.
_AMOUNT_HELP = ("A decimal amount ≥ 0 with at most 4 decimal places, as a JSON number or a numeric string "
                "(\"19.99\"); returned as a string so no precision is lost.")
_AMOUNT_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 999_999_999_999},
                            {"type": "string", "pattern": r"^[0-9]{1,12}(\.[0-9]{1,4})?$"}],
                  "description": _AMOUNT_HELP}
Amount = Annotated[Decimal, BeforeValidator(_amount), WithJsonSchema(_AMOUNT_SCHEMA, mode="validation"), Field(
    ge=0, max_digits=16, decimal_places=4, description=_AMOUNT_HELP)]
Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$"), Field(
    description="ISO 4217 code, three upper-case letters (USD, EUR, JPY).")]
WebUrl = Annotated[str, StringConstraints(max_length=MAX_URL_CHARS), AfterValidator(_web_url),
                   Field(json_schema_extra={"pattern": "^[hH][tT][tT][pP][sS]?://"})]
Metadata = Annotated[JsonObject(MAX_METADATA_BYTES), Field(
    description="Any JSON object, at most 16 KB serialised.")]


def _depth(value: Any) -> int:
    """Levels of objects/arrays inside a JSON value: a scalar is 0, `{"a": [1]}` is 2."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def check_product_fields(extra: dict[str, Any], reserved: set[str]) -> dict[str, Any]:
    """Product fields a request adds to the known ones (`colour`, `sizes`, ...): at most
    50, named like contact attributes, each nested at most 3 deep, 16 KB together."""
    if len(extra) > MAX_PRODUCT_FIELDS:
        raise ValidationFailed(f"At most {MAX_PRODUCT_FIELDS} product fields beside the known ones.")
    size = 0
    for name, value in extra.items():
        if name in reserved or not ATTRIBUTE_NAME.match(name):
            raise ValidationFailed(f"{name}: product field names are 1-64 letters, digits, _ or -, and not "
                                   f"one of {', '.join(sorted(reserved))}.", path=name)
        if _depth(value) > MAX_PRODUCT_FIELD_DEPTH:
            raise ValidationFailed(f"{name}: nested more than {MAX_PRODUCT_FIELD_DEPTH} levels deep.", path=name)
        size += len(name) + len(json.dumps(value, separators=(",", ":")).encode())
        if size > MAX_PRODUCT_DATA_BYTES:  # the field that passes the bound is named
            raise ValidationFailed(f"{name}: the product fields beside the known ones are larger than "
                                   f"{MAX_PRODUCT_DATA_BYTES // 1024} KB together.", path=name)
    return extra
