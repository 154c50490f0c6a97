"""What a shop reports about a contact (POST /conversions, /track/product-view): stored on
the contact's timeline, and put on the outbox for webhooks (a conversion) or for the
automations a product view triggers."""

from __future__ import annotations

from collections.abc import Callable

from pymongo.asynchronous.database import AsyncDatabase

from mongo import outbox, tracking
from pipelines.automations.triggers import PRODUCT_VIEWED_EVENT
from pipelines.core.clock import now_iso
from pipelines.core.ids import new_uuid


async def record_conversion(db: AsyncDatabase, contact: dict, *, value: str, currency: str, metadata: dict,
                            shown: Callable[[dict], dict]) -> dict:
    """The conversion (`shown` as the API shows it, in its `conversion.created` event too),
    and a `purchase` on the contact's timeline."""
    workspace_id = contact["workspace_id"]
    doc = {"_id": new_uuid(), "workspace_id": workspace_id, "contact_id": contact["_id"],
           "contact_email": contact["email"], "value": value, "currency": currency, "metadata": metadata,
           "created_at": now_iso()}
    view = shown(doc)
    await tracking.insert_conversion(db, doc, outbox.event_document(workspace_id, "conversion.created",
                                                                   {"conversion": view}))
    await tracking.add_contact_event(db, workspace_id, contact["_id"], "purchase",
                                     {"conversion_id": doc["_id"], "value": value, "currency": currency,
                                      "metadata": metadata}, event_id=f"{doc['_id']}:purchase")
    return view


async def record_product_view(db: AsyncDatabase, contact: dict, product: dict) -> dict:
    """The `page_viewed` event on the contact's timeline; automations read it from the outbox."""
    workspace_id = contact["workspace_id"]
    event = await tracking.add_contact_event(db, workspace_id, contact["_id"], "page_viewed", product)
    await outbox.record(db, workspace_id, PRODUCT_VIEWED_EVENT,
                        {"contact_id": contact["_id"], "contact_email": contact["email"], "product": product,
                         "viewed_at": event["at"]}, event_id=f"{event['_id']}:{PRODUCT_VIEWED_EVENT}")
    return event
