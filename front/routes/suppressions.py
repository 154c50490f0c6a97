"""The suppression list: addresses this workspace never sends to (every send path checks it)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from quart import Blueprint

from mongo import suppressions as suppression_store
from pipelines import views
from pipelines.audience.addresses import normalize
from pipelines.core.errors import NotFound
from pipelines.workflows import manage_suppressions

from ..lookup import found
from ..pagination import PageQuery
from ..resource_routes import list_route
from ..responses import one
from ..runtime import caller, db
from ..types import EmailAddress, Strict
from ..validation import body

NOT_LISTED = "This address is not on the suppression list."

bp = Blueprint("suppressions", __name__, url_prefix="/api/v1")

Reason = Literal["manual", "unsubscribe", "hard_bounce", "soft_bounce", "complaint"]
REASON_HELP = ("Why the address is suppressed: manual (added through the API), unsubscribe, "
               "hard_bounce (a permanent bounce), soft_bounce (3 transient bounces within 7 days), "
               "complaint (a spam report).")


class AddSuppression(Strict):
    email: EmailAddress = Field(description="The address to stop sending to.")
    reason: Reason = Field("manual", description=REASON_HELP + " Default manual.")


class SuppressionQuery(PageQuery):
    reason: Reason | None = Field(None, description="Only entries with this reason.")


list_route(bp, "/suppressions", "list_suppressions", SuppressionQuery, suppression_store.list_page,
           by=["reason"], view=views.suppression)


@bp.post("/suppressions")
@body(AddSuppression)
async def add_suppression(data: AddSuppression):
    doc = await manage_suppressions.add(db(), caller().workspace_id, data.email, data.reason)
    return one(views.suppression(doc), 201)


async def lift(workspace_id: str, email: str) -> str:
    """The address (normalised) taken off the workspace's list; 404 when it was not on it.
    DELETE /suppressions/:email and the console's remove button."""
    try:
        address = normalize(email)
    except ValueError:
        raise NotFound(NOT_LISTED) from None
    await found(manage_suppressions.remove(db(), workspace_id, address), NOT_LISTED)
    return address


@bp.delete("/suppressions/<path:email>")
async def remove_suppression(email: str):
    return one({"email": await lift(caller().workspace_id, email), "deleted": True})
