"""Conversion tracking: each conversion is kept, recorded on the contact as a `purchase`
event (what automations waiting for `purchase` look for) and emits conversion.created."""

from __future__ import annotations

from pydantic import Field
from quart import Blueprint

from mongo import tracking
from pipelines.workflows import track_events

from ..audience import contact_or_404
from ..commerce_types import Amount, Currency, Metadata, amount_text
from ..pagination import PageQuery, paged
from ..responses import one, public
from ..runtime import caller, db
from ..types import Id, Strict
from ..validation import body, query

bp = Blueprint("conversions", __name__, url_prefix="/api/v1")

DEFAULT_CURRENCY = "USD"


class CreateConversion(Strict):
    contact_id: Id = Field(description="A live contact of the workspace.")
    value: Amount
    currency: Currency = DEFAULT_CURRENCY
    metadata: Metadata = Field(default_factory=dict)


class ConversionQuery(PageQuery):
    pass


@bp.post("/conversions")
@body(CreateConversion)
async def create(data: CreateConversion):
    contact = await contact_or_404(contact_id=data.contact_id)
    return one(await track_events.record_conversion(db(), contact, value=amount_text(data.value),
                                                    currency=data.currency, metadata=data.metadata,
                                                    shown=public), 201)


@bp.get("/conversions")
@query(ConversionQuery)
async def list_conversions(params: ConversionQuery):
    listed = await tracking.conversions_page(db(), caller().workspace_id, params.limit, params.offset)
    return paged(listed, params, public)
