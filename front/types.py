"""Field types shared by request models."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from pipelines.addresses import normalize


def _email(value: str) -> str:
    return normalize(value)


EmailAddress = Annotated[str, StringConstraints(max_length=254), AfterValidator(_email),
                         Field(json_schema_extra={"format": "email"})]
Name100 = Annotated[str, StringConstraints(max_length=100)]
Id = Annotated[str, StringConstraints(min_length=1, max_length=100)]


class Strict(BaseModel):
    """Base for request bodies: unknown fields are refused, so typos are caught."""
    model_config = ConfigDict(extra="forbid")
