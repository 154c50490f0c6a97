"""Static and condition-based (dynamic) lists and their members."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints
from quart import Blueprint

from mongo import contacts as contact_store
from mongo import lists as list_store
from pipelines.errors import NotFound, ValidationFailed

from ..audience import checked_filter, list_or_404, list_views, members_filter
from ..pagination import PageQuery, page
from ..responses import one
from ..runtime import caller, db
from ..types import Id, Strict
from ..validation import body, query
from .segments import Conditions

bp = Blueprint("lists", __name__, url_prefix="/api/v1")

MAX_MEMBER_IDS = 5000

ListName = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
Description = Annotated[str, StringConstraints(max_length=1000)]


class CreateList(Strict):
    name: ListName
    description: Description | None = None
    type: Literal["static", "dynamic"] = Field("static", description=(
        "static: members are added and removed explicitly. dynamic: members are the contacts "
        "matching `conditions` (computed on every read). Fixed at creation."))
    conditions: Conditions | None = Field(None, description="Required for dynamic lists, refused for static ones.")


class UpdateList(Strict):
    name: ListName = None
    description: Description | None = Field(None, description="null clears.")
    conditions: Conditions = Field(None, description="Dynamic lists only.")


class ListQuery(PageQuery):
    type: Literal["static", "dynamic"] | None = None
    search: Annotated[str, StringConstraints(max_length=200)] | None = Field(
        None, description="Part of the list name, case-insensitive.")


class MemberIds(Strict):
    contact_ids: Annotated[list[Id], Field(min_length=1, max_length=MAX_MEMBER_IDS, description=(
        "1 to 5000 contact ids; ids that are not live contacts of this workspace are reported in not_found."))]


def _static_only(list_doc: dict) -> None:
    if list_doc["type"] != "static":
        raise ValidationFailed("This is a dynamic list: its members are the contacts matching its "
                               "conditions, so they cannot be added or removed by id.")


@bp.get("/lists")
@query(ListQuery)
async def list_lists(params: ListQuery):
    items, total = await list_store.page(db(), caller().workspace_id, type=params.type, search=params.search,
                                         limit=params.limit, offset=params.offset)
    return page(await list_views(items), total=total, limit=params.limit, offset=params.offset)


@bp.post("/lists")
@body(CreateList)
async def create_list(data: CreateList):
    conditions = data.conditions.model_dump(exclude_none=True) if data.conditions is not None else None
    if data.type == "dynamic" and conditions is None:
        raise ValidationFailed("conditions: a dynamic list needs conditions.", path="conditions")
    if data.type == "static" and conditions is not None:
        raise ValidationFailed("conditions: a static list has no conditions; use type dynamic.", path="conditions")
    if conditions is not None:
        await checked_filter(conditions)
    doc = await list_store.create(db(), caller().workspace_id, name=data.name, description=data.description,
                                  type=data.type, conditions=conditions)
    return one((await list_views([doc]))[0], 201)


@bp.get("/lists/<uuid:list_id>")
async def get_list(list_id: str):
    return one((await list_views([await list_or_404(list_id)]))[0])


@bp.patch("/lists/<uuid:list_id>")
@body(UpdateList)
async def update_list(list_id: str, data: UpdateList):
    current = await list_or_404(list_id)
    changes = data.model_dump(include=data.model_fields_set)
    if "conditions" in changes:
        changes["conditions"] = data.conditions.model_dump(exclude_none=True)
        if current["type"] != "dynamic":
            raise ValidationFailed("conditions: a static list has no conditions.", path="conditions")
        await checked_filter(changes["conditions"])
    doc = await list_store.update(db(), caller().workspace_id, list_id, changes) if changes else current
    if doc is None:
        raise NotFound("No such list in this workspace.")
    return one((await list_views([doc]))[0])


@bp.delete("/lists/<uuid:list_id>")
async def delete_list(list_id: str):
    if not await list_store.delete(db(), caller().workspace_id, list_id):
        raise NotFound("No such list in this workspace.")
    return one({"id": list_id, "deleted": True})


@bp.get("/lists/<uuid:list_id>/members")
@query(PageQuery)
async def members(list_id: str, params: PageQuery):
    list_doc = await list_or_404(list_id)
    items, total = await contact_store.page(db(), caller().workspace_id, members_filter(list_doc),
                                            limit=params.limit, offset=params.offset)
    return page([contact_store.view(d) for d in items], total=total, limit=params.limit, offset=params.offset)


@bp.post("/lists/<uuid:list_id>/members")
@body(MemberIds)
async def add_members(list_id: str, data: MemberIds):
    """Add contacts to a static list; answers {list_id, added, already_members, not_found}."""
    list_doc = await list_or_404(list_id)
    _static_only(list_doc)
    outcome = await list_store.add_members(db(), list_doc, data.contact_ids)
    return one({"list_id": list_id, "added": len(outcome.changed),
                "already_members": len(outcome.unchanged), "not_found": outcome.not_found})


@bp.delete("/lists/<uuid:list_id>/members")
@body(MemberIds)
async def remove_members(list_id: str, data: MemberIds):
    """Remove contacts from a static list; answers {list_id, removed, not_members, not_found}."""
    list_doc = await list_or_404(list_id)
    _static_only(list_doc)
    outcome = await list_store.remove_members(db(), list_doc, data.contact_ids)
    return one({"list_id": list_id, "removed": len(outcome.changed),
                "not_members": len(outcome.unchanged), "not_found": outcome.not_found})
