"""Product-view tracking: `POST /track/product-view` records a `page_viewed` event on the
contact (what automations waiting for `page_viewed` look for). Besides the known product
fields, any other product field (`colour`, `sizes`, ...) is kept as sent, within bounds
(front/commerce_types.check_product_fields)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints
from quart import Blueprint

from pipelines import views
from pipelines.audience.segment_rules import ATTRIBUTE_NAME
from pipelines.workflows import track_events

from ..audience import contact_or_404
from ..commerce_types import (
    MAX_PRODUCT_FIELD_DEPTH,
    MAX_PRODUCT_FIELDS,
    Amount,
    Currency,
    Metadata,
    WebUrl,
    amount_text,
    check_product_fields,
)
from ..responses import one
from ..runtime import db
from ..types import EmailAddress, Strict
from ..validation import body

bp = Blueprint("tracking", __name__, url_prefix="/api/v1")

Text200 = Annotated[str, StringConstraints(min_length=1, max_length=200)]


def _nested_at_most(levels: int) -> dict:
    """A JSON value with at most `levels` levels of objects/arrays (front.commerce_types._depth)."""
    scalar = {"type": ["string", "number", "boolean", "null"]}
    if levels == 0:
        return scalar
    inner = _nested_at_most(levels - 1)
    return {"anyOf": [scalar, {"type": "array", "items": inner}, {"type": "object", "additionalProperties": inner}]}


class ProductView(Strict):
    """The known fields are checked; any other field is product data kept as sent (at most
    50 fields, each nested at most 3 levels deep, 16 KB together)."""
    model_config = ConfigDict(extra="allow", json_schema_extra={
        "additionalProperties": _nested_at_most(MAX_PRODUCT_FIELD_DEPTH),
        "propertyNames": {"pattern": ATTRIBUTE_NAME.pattern, "not": {"enum": ["id", "contact_id", "event",
                                                                        "viewed_at"]}},
        "maxProperties": MAX_PRODUCT_FIELDS + 9})

    contact_email: EmailAddress = Field(description="A live contact of the workspace.")
    product_id: Text200
    name: Annotated[str, StringConstraints(max_length=500)] | None = None
    price: Amount | None = None
    currency: Currency | None = Field(
        None, description="ISO 4217 currency of `price`; USD when a price is given without one.")
    url: WebUrl | None = Field(None, description="The product page (http or https).")
    category: Annotated[str, StringConstraints(max_length=200)] | None = None
    image_url: WebUrl | None = None
    metadata: Metadata | None = None


# The answer's own fields: product data may not take their names.
RESERVED_FIELDS = {"id", "contact_id", "event", "viewed_at"}


@bp.post("/track/product-view")
@body(ProductView)
async def product_view(data: ProductView):
    extra = check_product_fields(data.model_extra or {}, RESERVED_FIELDS)
    contact = await contact_or_404(email=data.contact_email)
    product = data.model_dump(exclude={"contact_email", *extra})
    if data.price is not None:
        product["price"] = amount_text(data.price)
        product["currency"] = data.currency or "USD"
    product["metadata"] = data.metadata or {}
    product.update(extra)
    event = await track_events.record_product_view(db(), contact, product)
    return one(views.product_view(event, contact["email"]), 201)
