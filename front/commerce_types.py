"""Field types shared by product-view and conversion tracking: money, currency codes,
product links, free-form metadata."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StringConstraints

MAX_METADATA_BYTES = 16 * 1024
MAX_URL_CHARS = 2048


def _small_metadata(value: dict[str, Any]) -> dict[str, Any]:
    if len(json.dumps(value, separators=(",", ":")).encode()) > MAX_METADATA_BYTES:
        raise ValueError(f"metadata is larger than {MAX_METADATA_BYTES // 1024} KB once serialised")
    return value


def _web_url(value: str) -> str:
    if not value.lower().startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value


def amount_text(value: Decimal) -> str:
    """How an amount is stored and shown: a decimal string, never a float, no exponent."""
    return format(value, "f")


Amount = Annotated[Decimal, Field(
    ge=0, max_digits=16, decimal_places=4,
    description="A decimal amount ≥ 0 with at most 4 decimal places, as a JSON number or a "
                "numeric string (\"19.99\"); returned as a string so no precision is lost.")]
Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$"), Field(
    description="ISO 4217 code, three upper-case letters (USD, EUR, JPY).")]
WebUrl = Annotated[str, StringConstraints(max_length=MAX_URL_CHARS), AfterValidator(_web_url)]
Metadata = Annotated[dict[str, Any], AfterValidator(_small_metadata), Field(
    description="Any JSON object, at most 16 KB serialised.")]
