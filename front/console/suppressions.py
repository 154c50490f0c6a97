"""Suppressions: find an address, list them newest first (by reason), remove one with the
API's own removal (DELETE /suppressions/:email)."""

from __future__ import annotations

from typing import get_args
from urllib.parse import urlencode

from pydantic import BaseModel, Field
from quart import redirect, request

from mongo import suppressions as suppression_store
from mongo.documents import cursor_of, cursor_position
from pipelines import views
from pipelines.audience.addresses import normalize

from ..routes.suppressions import Reason, lift
from ..runtime import caller, db
from ..types import EmailAddress
from . import bp
from .forms import PAGE_ROWS, filters, shown_filters
from .guard import page, render


class SuppressionSearch(BaseModel):
    email: EmailAddress | None = Field(None, description="This address only.")
    reason: Reason | None = None
    after: str | None = Field(None, max_length=200, description="The last row shown (documents.cursor_of).")


@page(bp, "/suppressions", area="suppressions")
async def suppressions():
    params = filters(SuppressionSearch)
    workspace_id = caller().workspace_id
    if params.email:  # one primary-key lookup
        one = await suppression_store.get(db(), workspace_id, normalize(params.email))
        docs = [one] if one and (not params.reason or one["reason"] == params.reason) else []
    else:
        docs = await suppression_store.newest(db(), workspace_id, reason=params.reason, limit=PAGE_ROWS + 1,
                                              after=cursor_position(params.after))
    given = shown_filters("email", "reason")
    more = len(docs) > PAGE_ROWS
    rows = [views.suppression(d) for d in docs[:PAGE_ROWS]]
    return await render("suppressions.html", title="Suppressions", rows=rows, given=given, reasons=get_args(Reason),
                        removed=request.args.get("removed"),
                        next_page=f"?{urlencode({**given, 'after': cursor_of(docs[PAGE_ROWS - 1])})}" if more else None)


@page(bp, "/suppressions/remove", area="suppressions", methods=("POST",))
async def remove_suppression():
    form = await request.form
    address = await lift(caller().workspace_id, form.get("email", ""))
    return redirect(f"/console/suppressions?{urlencode({'removed': address})}", 303)
