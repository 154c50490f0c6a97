"""Tags and their assignment to contacts."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints
from quart import Blueprint

from mongo import memberships
from mongo import tags as tag_store
from pipelines import views
from pipelines.workflows import manage_tags

from ..audience import contacts_page, members_changed
from ..lookup import owned
from ..pagination import PageQuery
from ..resource_routes import delete_route, list_route, read_route
from ..responses import one
from ..runtime import caller, db
from ..types import Strict, Uuid
from ..validation import body, query

bp = Blueprint("tags", __name__, url_prefix="/api/v1")

DEFAULT_COLOR = "#6366f1"
MAX_ASSIGN = 500

TagName = Annotated[str, StringConstraints(min_length=1, max_length=50, strip_whitespace=True)]
Color = Annotated[str, StringConstraints(pattern=r"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", to_lower=True)]
Description = Annotated[str, StringConstraints(max_length=200)]


class CreateTag(Strict):
    name: TagName = Field(description="Up to 50 characters; unique per workspace, case-insensitively.")
    color: Color = Field(DEFAULT_COLOR, description="Hex colour #RGB or #RRGGBB (default #6366f1).")
    description: Description | None = Field(None, description="Up to 200 characters.")


class UpdateTag(Strict):
    name: TagName = Field(None, description="Up to 50 characters; unique per workspace.")
    color: Color = Field(None, description="Hex colour #RGB or #RRGGBB.")
    description: Description | None = Field(None, description="Up to 200 characters; null clears.")


class TagQuery(PageQuery):
    search: Annotated[str, StringConstraints(max_length=50)] | None = Field(
        None, description="Part of the tag name, case-insensitive.")


class TagContacts(Strict):
    contact_ids: Annotated[list[Uuid], Field(min_length=1, max_length=MAX_ASSIGN, description=(
        "1 to 500 contact ids (UUIDs; anything else is 400 with its path). Ids that are not live contacts "
        "of this workspace are reported in not_found and change nothing."))]


async def _tag_views(docs: list[dict]) -> list[dict]:
    """The tags as the API shows them, each with its live contact_count."""
    counted = await memberships.counts(db(), caller().workspace_id, "tags", [d["_id"] for d in docs])
    return [views.tag(d, counted[d["_id"]]) for d in docs]


async def _one_view(doc: dict) -> dict:
    return (await _tag_views([doc]))[0]


list_route(bp, "/tags", "list_tags", TagQuery, tag_store.page, by=["search"], page_view=_tag_views)


@bp.post("/tags")
@body(CreateTag)
async def create_tag(data: CreateTag):
    doc = await manage_tags.create(db(), caller().workspace_id, name=data.name, color=data.color,
                                   description=data.description)
    return one(await _one_view(doc), 201)


read_route(bp, "/tags/<uuid:tag_id>", "get_tag", tag_store, "tag", _one_view)


@bp.patch("/tags/<uuid:tag_id>")
@body(UpdateTag)
async def update_tag(tag_id: str, data: UpdateTag):
    current = await owned(tag_store, tag_id, "tag")
    changes = data.model_dump(include=data.model_fields_set)
    if not changes:
        return one(await _one_view(current))
    return one(await _one_view(await manage_tags.update(db(), caller().workspace_id, tag_id, changes)))


delete_route(bp, "/tags/<uuid:tag_id>", "delete_tag", manage_tags.delete, "tag")


@bp.get("/tags/<uuid:tag_id>/contacts")
@query(PageQuery)
async def tag_contacts(tag_id: str, params: PageQuery):
    await owned(tag_store, tag_id, "tag")
    return await contacts_page({"tags": tag_id}, params)


@bp.post("/tags/<uuid:tag_id>/contacts")
@body(TagContacts)
async def assign(tag_id: str, data: TagContacts):
    """Assign the tag; answers {tag_id, assigned, already_assigned, not_found}."""
    outcome = await manage_tags.assign(db(), await owned(tag_store, tag_id, "tag"), data.contact_ids)
    return one(members_changed({"tag_id": tag_id}, outcome, "assigned", "already_assigned"))


@bp.delete("/tags/<uuid:tag_id>/contacts")
@body(TagContacts)
async def unassign(tag_id: str, data: TagContacts):
    """Remove the tag; answers {tag_id, removed, not_assigned, not_found}."""
    outcome = await manage_tags.unassign(db(), await owned(tag_store, tag_id, "tag"), data.contact_ids)
    return one(members_changed({"tag_id": tag_id}, outcome, "removed", "not_assigned"))
