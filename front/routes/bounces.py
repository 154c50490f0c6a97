"""Bounce records: DSN bounces, ARF complaints and synchronous 5xx rejections."""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, WithJsonSchema
from quart import Blueprint

from mongo import bounces as bounce_store
from pipelines import views
from pipelines.core.clock import iso, parse_iso
from pipelines.core.errors import ValidationFailed

from ..pagination import PageQuery
from ..resource_routes import page_of, read_route
from ..types import EmailAddress
from ..validation import query

bp = Blueprint("bounces", __name__, url_prefix="/api/v1")

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _moment(value: str, *, end_of_day: bool) -> str:
    value = value.upper()  # RFC 3339 allows a lower-case `t` and `z`
    try:
        if _DATE_ONLY.match(value):
            day = dt.date.fromisoformat(value)
            moment = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
            return iso(moment + dt.timedelta(days=1) if end_of_day else moment)
        return iso(parse_iso(value))
    except ValueError:
        raise ValueError("expected an ISO 8601 date (2026-03-01) or date-time "
                         "(2026-03-01T12:00:00Z; without an offset, UTC)") from None


# Documented as what it is, a date or a date-time (so an empty `since=` is outside the
# schema as well as refused).
_MOMENT_SCHEMA = WithJsonSchema({"anyOf": [{"type": "string", "format": "date"},
                                           {"type": "string", "format": "date-time"}]})
Since = Annotated[str, AfterValidator(lambda v: _moment(v, end_of_day=False)), _MOMENT_SCHEMA]
Until = Annotated[str, AfterValidator(lambda v: _moment(v, end_of_day=True)), _MOMENT_SCHEMA]


class BounceQuery(PageQuery):
    type: Literal["permanent", "transient", "undetermined"] | None = Field(
        None, description="Only bounces of this classification: what the failure means for the address "
        "(permanent: it does not exist or is disabled, suppressed for good; a policy block, a full mailbox "
        "or a refused message is transient whatever its SMTP class). Each record's `category` says why.")
    kind: Literal["bounce", "complaint"] | None = Field(
        None, description="bounce (a delivery failure) or complaint (an ARF spam report; recorded as type "
        "permanent because the address is suppressed for good).")
    email: EmailAddress | None = Field(None, description="Only bounces of this recipient (any letter case).")
    since: Since | None = Field(None, description="Recorded at or after this moment: an ISO 8601 date "
                                "(start of that day, UTC) or date-time (no offset means UTC).")
    until: Until | None = Field(None, description="Recorded before this moment: an ISO 8601 date-time, or a "
                                "date meaning the end of that day (UTC), so since=until=a date lists that day.")


@bp.get("/bounces")
@query(BounceQuery)
async def list_bounces(params: BounceQuery):
    if params.since and params.until and params.since >= params.until:
        raise ValidationFailed("until: must be later than since.", path="until")
    return await page_of(bounce_store.list_page, params, type_=params.type, kind=params.kind, email=params.email,
                         since=params.since, until=params.until, view=views.bounce)


read_route(bp, "/bounces/<bounce_id>", "get_bounce", bounce_store, "bounce", views.bounce)
