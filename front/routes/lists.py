"""Static and condition-based (dynamic) lists and their members."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints
from quart import Blueprint

from mongo import lists as list_store
from pipelines.core.errors import Conflict, ValidationFailed
from pipelines.workflows import manage_lists

from ..audience import changed_fields, checked_filter, contacts_page, list_views, members_changed, members_filter
from ..lookup import owned, updated
from ..pagination import PageQuery
from ..resource_routes import delete_route, list_route, read_route
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
    # Said in the document too: conditions for a dynamic list, none for a static one
    model_config = ConfigDict(json_schema_extra={"oneOf": [
        {"required": ["type", "conditions"], "properties": {"type": {"const": "dynamic"},
                                                            "conditions": {"type": "object"}}},
        {"properties": {"type": {"const": "static"}, "conditions": {"type": "null"}}},
    ]})
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


async def _static_list(list_id: str) -> dict:
    list_doc = await owned(list_store, list_id, "list")
    if list_doc["type"] != "static":
        # 409 as every other refusal that depends on a resource's state: the request itself
        # is valid (the document cannot say which lists are dynamic).
        raise Conflict("This is a dynamic list: its members are the contacts matching its "
                       "conditions, so they cannot be added or removed by id.")
    return list_doc


async def _one_view(doc: dict) -> dict:
    return (await list_views([doc]))[0]


list_route(bp, "/lists", "list_lists", ListQuery, list_store.page, by=["type", "search"], page_view=list_views)


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
    doc = await manage_lists.create(db(), caller().workspace_id, name=data.name, description=data.description,
                                    type=data.type, conditions=conditions)
    return one(await _one_view(doc), 201)


read_route(bp, "/lists/<uuid:list_id>", "get_list", list_store, "list", _one_view)


@bp.patch("/lists/<uuid:list_id>")
@body(UpdateList)
async def update_list(list_id: str, data: UpdateList):
    current = await owned(list_store, list_id, "list")
    if "conditions" in data.model_fields_set and current["type"] != "dynamic":
        raise ValidationFailed("conditions: a static list has no conditions.", path="conditions")
    doc = await updated(manage_lists.update, list_id, "list", await changed_fields(data), current)
    return one(await _one_view(doc))


delete_route(bp, "/lists/<uuid:list_id>", "delete_list", manage_lists.delete, "list")


@bp.get("/lists/<uuid:list_id>/members")
@query(PageQuery)
async def members(list_id: str, params: PageQuery):
    list_doc = await owned(list_store, list_id, "list")
    return await contacts_page(members_filter(list_doc), params)


@bp.post("/lists/<uuid:list_id>/members")
@body(MemberIds)
async def add_members(list_id: str, data: MemberIds):
    """Add contacts to a static list; answers {list_id, added, already_members, not_found}."""
    outcome = await manage_lists.add_members(db(), await _static_list(list_id), data.contact_ids)
    return one(members_changed({"list_id": list_id}, outcome, "added", "already_members"))


@bp.delete("/lists/<uuid:list_id>/members")
@body(MemberIds)
async def remove_members(list_id: str, data: MemberIds):
    """Remove contacts from a static list; answers {list_id, removed, not_members, not_found}."""
    outcome = await manage_lists.remove_members(db(), await _static_list(list_id), data.contact_ids)
    return one(members_changed({"list_id": list_id}, outcome, "removed", "not_members"))
