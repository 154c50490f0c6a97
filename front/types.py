"""Field types shared by request models."""

from __future__ import annotations

import unicodedata
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from pipelines.addresses import normalize


def _email(value: str) -> str:
    return normalize(value)


EmailAddress = Annotated[str, StringConstraints(max_length=254), AfterValidator(_email),
                         Field(json_schema_extra={"format": "email"})]
# Control characters (CR, LF, NUL, ESC, ...) and the Unicode line/paragraph separators
# the email library treats as line breaks: none of them belongs in a header.
_HEADER_UNSAFE_CATEGORIES = ("Cc", "Zl", "Zp")


def _display_name(value: str) -> str:
    if any(unicodedata.category(ch) in _HEADER_UNSAFE_CATEGORIES for ch in value):
        raise ValueError("must not contain line breaks or other control characters")
    return value


DisplayName = Annotated[str, StringConstraints(max_length=200), AfterValidator(_display_name),
                        Field(description="Display name in the From header: at most 200 characters, "
                                          "no line breaks or other control characters.")]
Name100 = Annotated[str, StringConstraints(max_length=100)]
Id = Annotated[str, StringConstraints(min_length=1, max_length=100)]


class Strict(BaseModel):
    """Base for request bodies: unknown fields are refused, so typos are caught."""
    model_config = ConfigDict(extra="forbid")
