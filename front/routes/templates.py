"""Versioned templates, their history, and json_structure rendering.

The html a client stores is what is sent. A create with json_structure but no html gets
html rendered from json_structure. A PATCH keeps the stored html unless it sends html or
asks for it to be rendered (`render_html: true`): the spec leaves keeping the two in sync
to the client, so a client's own html is never replaced behind its back.
`POST /templates/render` renders without storing anything."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints
from quart import Blueprint

from mongo import templates as template_store
from pipelines import views
from pipelines.core.errors import ValidationFailed
from pipelines.templates import email_blocks, merge_tags
from pipelines.templates.email_blocks import merge_tag_error_in, validate_structure
from pipelines.templates.email_blocks_html import render_structure
from pipelines.workflows import manage_templates

from ..lookup import found, no_such, owned, updated
from ..pagination import PageQuery, paged
from ..resource_routes import delete_route, list_route, read_route
from ..responses import one
from ..runtime import caller, db, settings
from ..types import NO_NUL, FreeJson, JsonObject, Strict
from ..validation import body, query

bp = Blueprint("templates", __name__, url_prefix="/api/v1")

MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 2000

Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]
Description = Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION_CHARS)]
HTML_HELP = ("The email HTML (max 256 KB) with merge tags; sent as stored. Malformed merge tags, and "
             "blocks nested more than 400 deep, are refused with their line and column. Omit it and give "
             "json_structure to have it rendered.")
STRUCTURE_HELP = ("The visual editor's document: {blocks: [{id, type, content}], settings}, at most 512 KB "
                  "serialised. Validated; unknown fields are kept for the editor. docs/templates.md "
                  "(json_structure) has each block's content.")
MAX_STRUCTURE_BYTES = 512 * 1024
# The outline pipelines/templates/email_blocks.py checks first (each block's content is checked by type);
# unknown fields are kept, any JSON value
Structure = JsonObject(MAX_STRUCTURE_BYTES, FreeJson(lambda value: {
    "type": "object", "propertyNames": NO_NUL, "additionalProperties": value, "required": ["blocks"],
    "properties": {"blocks": {"type": "array", "items": {
            "type": "object", "propertyNames": NO_NUL, "additionalProperties": value,
            "required": ["id", "type", "content"], "properties": {
                "id": {"type": "string", "minLength": 1, "maxLength": 100},
                "type": {"enum": list(email_blocks.BLOCK_TYPES)},
                "content": {"type": "object", "propertyNames": NO_NUL, "additionalProperties": value}}}}}}))


class CreateTemplate(Strict):
    # html is required unless json_structure is given, said in the document too
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"required": ["html"], "properties": {"html": {"type": "string"}}},
        {"required": ["json_structure"], "properties": {"json_structure": {"type": "object"}}},
    ]})
    name: Name = Field(description="Required, 1–200 characters.")
    # str, not str | None: null is refused (said so in the document too)
    html: str = Field(None, description=HTML_HELP + " Required unless json_structure is given.")
    description: Description | None = Field(None, description="Optional, up to 2000 characters.")
    json_structure: Structure | None = Field(None, description=STRUCTURE_HELP)


_RENDER_HTML = {"required": ["render_html"], "properties": {"render_html": {"const": True}}}


class UpdateTemplate(Strict):
    # Said in the document too: some change, and render_html neither with html nor with a
    # json_structure of null (nothing to render from). Whether a template without one in
    # the body has one stored, only the server knows (400 at render_html).
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"properties": {"render_html": {"const": False}},
         "anyOf": [{"required": [name]} for name in ("name", "html", "description", "json_structure")]},
        {**_RENDER_HTML, "properties": {**_RENDER_HTML["properties"], "json_structure": {"type": "object"}},
         "not": {"required": ["html"]}},
    ]})
    name: Name = Field(None, description="1–200 characters; null is refused.")
    html: str = Field(None, description="The email HTML (max 256 KB) with merge tags, checked as on create; "
                                               "sent as stored. null is refused. Without it the stored html is kept.")
    description: Description | None = Field(None, description="null clears it.")
    json_structure: Structure | None = Field(None, description=STRUCTURE_HELP + " null clears it. "
                                             "Changing it leaves the stored html as it is unless "
                                             "render_html is true.")
    render_html: bool = Field(False, description="true: replace html with html rendered from json_structure "
                                                 "(the one given, else the stored one). Not with html.")


class RenderStructure(Strict):
    json_structure: Structure = Field(description=STRUCTURE_HELP)


class TemplateQuery(PageQuery):
    search: Annotated[str, StringConstraints(max_length=200)] | None = Field(
        None, description="Case-insensitive substring of the template name.")


def checked_html(html: str, path: str = "html", structure: dict | None = None) -> str:
    """`html` within the size limit and with well-formed merge tags. For html rendered from
    `structure`, a malformed tag is reported at the block field that holds it."""
    limit = settings().max_html_bytes
    if len(html.encode()) > limit:
        raise ValidationFailed(f"{path}: larger than {limit // 1024} KB.", path=path)
    try:
        merge_tags.parse(html)
    except merge_tags.MergeTagError as error:
        raise (structure is not None and merge_tag_error_in(structure)) or error.at(path) from None
    return html


def content_changes(data: Strict, *, render_html: bool, stored_structure: dict | None = None) -> dict:
    """The content fields a request sets, validated. `render_html`: html is rendered from
    the json_structure given (else `stored_structure`) instead of coming from the request."""
    given = data.model_fields_set
    changes = {k: getattr(data, k) for k in ("name", "description", "json_structure", "html") if k in given}
    if changes.get("json_structure") is not None:
        validate_structure(changes["json_structure"])
    if not render_html:
        if changes.get("html") is not None:
            checked_html(changes["html"])
        return changes
    if "html" in changes:
        raise ValidationFailed("render_html: give html or ask for it to be rendered, not both.", path="render_html")
    structure = changes["json_structure"] if "json_structure" in changes else stored_structure
    if structure is None:
        raise ValidationFailed("render_html: there is no json_structure to render html from.", path="render_html")
    changes["html"] = checked_html(render_structure(structure), "json_structure", structure)
    return changes


@bp.post("/templates")
@body(CreateTemplate)
async def create_template(data: CreateTemplate):
    if data.html is None and data.json_structure is None:
        raise ValidationFailed("html: Field required (or give json_structure to render it from).", path="html")
    changes = content_changes(data, render_html=data.html is None)
    doc = await manage_templates.create(db(), caller().workspace_id, changes)
    return one(views.template(doc), 201)


list_route(bp, "/templates", "list_templates", TemplateQuery, template_store.list_page, by=["search"],
           view=lambda d: views.template(d, full=False))


@bp.post("/templates/render")
@body(RenderStructure)
async def render_template_structure(data: RenderStructure):
    structure = validate_structure(data.json_structure)
    return one({"html": checked_html(render_structure(structure), "json_structure", structure)})


read_route(bp, "/templates/<uuid:template_id>", "get_template", template_store, "template", views.template)


@bp.patch("/templates/<uuid:template_id>")
@body(UpdateTemplate)
async def update_template(template_id: str, data: UpdateTemplate):
    renders_stored_structure = data.render_html and "json_structure" not in data.model_fields_set
    stored = await owned(template_store, template_id, "template") if renders_stored_structure else None
    changes = content_changes(data, render_html=data.render_html,
                              stored_structure=stored.get("json_structure") if stored else None)
    if not changes:
        raise ValidationFailed("Give at least one of name, html, description, json_structure.")
    doc = await updated(manage_templates.update, template_id, "template", changes)
    return one(views.template(doc))


delete_route(bp, "/templates/<uuid:template_id>", "delete_template", manage_templates.delete, "template")


@bp.get("/templates/<uuid:template_id>/versions")
@query(PageQuery)
async def list_template_versions(template_id: str, params: PageQuery):
    await owned(template_store, template_id, "template")
    listed = await template_store.list_versions(db(), caller().workspace_id, template_id,
                                                limit=params.limit, offset=params.offset)
    return paged(listed, params, lambda d: views.template_version(d, full=False))


async def _version(template_id: str, version: int) -> dict:
    await owned(template_store, template_id, "template")
    return await found(template_store.get_version(db(), caller().workspace_id, template_id, version),
                       f"Template {template_id} has no version {version}.")


@bp.get("/templates/<uuid:template_id>/versions/<int:version>")
async def get_template_version(template_id: str, version: int):
    return one(views.template_version(await _version(template_id, version)))


@bp.post("/templates/<uuid:template_id>/versions/<int:version>/restore")
async def restore_template_version(template_id: str, version: int):
    old = await _version(template_id, version)
    doc = await found(manage_templates.restore_version(db(), caller().workspace_id, template_id, old),
                      no_such("template"))
    return one(views.template(doc))
