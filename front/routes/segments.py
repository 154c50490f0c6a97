"""Rule-based segments: CRUD, estimate and matching contacts. The rule language is
pipelines/audience/segment_rules.py (also used by dynamic lists)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints
from quart import Blueprint

from mongo import contacts as contact_store
from mongo import segments as segment_store
from pipelines import views
from pipelines.audience import segment_rules
from pipelines.workflows import manage_segments

from ..audience import changed_fields, checked_filter, contacts_page
from ..lookup import owned, updated
from ..pagination import PageQuery
from ..resource_routes import delete_route, list_route, read_route
from ..responses import one
from ..runtime import caller, db
from ..types import Strict
from ..validation import body, query

bp = Blueprint("segments", __name__, url_prefix="/api/v1")

Scalar = str | int | float | bool
SegmentName = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
Description = Annotated[str, StringConstraints(max_length=1000)]


_TEXT = {"type": "string", "maxLength": segment_rules.MAX_TEXT_VALUE_CHARS}
_SCALAR = {"anyOf": [_TEXT, {"type": "number"}, {"type": "boolean"}]}
# `"value": null` is the same as no value (exists / not_exists take none); the operators
# that need one say so above it
_OMITTED = {"type": "null"}


def _when(condition: dict, then: dict) -> dict:
    return {"if": {"properties": condition, "required": list(condition)}, "then": then}


# What pipelines/audience/segment_rules.py checks beyond each part's type, said in the document:
# the value each operator takes, and the operators and values of the named contact fields.
RULE_SCHEMA = {"allOf": [
    _when({"operator": {"enum": ["contains", "not_contains", "starts_with"]}},
          {"required": ["value"], "properties": {"value": {**_TEXT, "minLength": 1}}}),
    _when({"operator": {"const": "in"}}, {"required": ["value"], "properties": {"value": {
        "type": "array", "minItems": 1, "maxItems": segment_rules.MAX_IN_VALUES, "items": _SCALAR}}}),
    _when({"operator": {"enum": ["equals", "not_equals"]}}, {"required": ["value"], "properties": {"value": _SCALAR}}),
    _when({"operator": {"enum": ["gt", "gte", "lt", "lte"]}},
          {"required": ["value"], "properties": {"value": {"anyOf": [_TEXT, {"type": "number"}]}}}),
    _when({"field": {"enum": ["subscribed", "bounced"]}}, {"properties": {
        "operator": {"enum": ["equals", "not_equals"]}, "value": {"type": "boolean"}}}),
    _when({"field": {"const": "created_at"}}, {"properties": {
        "operator": {"enum": ["equals", "not_equals", "gt", "gte", "lt", "lte"]},
        "value": {"type": "string", "format": "date-time"}}}),
    _when({"field": {"enum": ["tags", "lists"]}}, {"properties": {
        "operator": {"enum": ["equals", "not_equals", "contains", "not_contains", "in", "exists", "not_exists"]},
        "value": {"anyOf": [{"type": "string", "minLength": 1},
                            {"type": "array", "items": {"type": "string", "minLength": 1}}, _OMITTED]}}}),
    _when({"field": {"enum": ["email", "first_name", "last_name"]}}, {"properties": {"value": {"anyOf": [
        {**_TEXT, "minLength": 1}, {"type": "array", "items": {**_TEXT, "minLength": 1}}, _OMITTED]}}}),
]}


class Rule(Strict):
    model_config = ConfigDict(json_schema_extra=RULE_SCHEMA)
    field: Annotated[str, StringConstraints(min_length=1, max_length=100)] = Field(json_schema_extra={
        "pattern": r"^(attributes\.)?[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$"}, description=(
        "email, first_name, last_name, subscribed, bounced, created_at, tags (a tag id), "
        "lists (a static list id), attributes.<name> or a bare custom attribute <name>."))
    operator: Literal[segment_rules.OPERATORS] = Field(description=(
        "contains, not_contains and starts_with are case-insensitive; not_equals and not_contains "
        "also match contacts without the field; exists on text fields means non-empty."))
    value: Scalar | list[Scalar] | None = Field(None, description=(
        "String, number or boolean; an array for `in`; omitted for exists / not_exists."))


class Conditions(Strict):
    match: Literal[segment_rules.MATCH_VALUES] = Field("all", description="all: every rule; any: at least one.")
    rules: Annotated[list[Rule], Field(min_length=1, max_length=segment_rules.MAX_RULES)]


class CreateSegment(Strict):
    name: SegmentName
    description: Description | None = None
    conditions: Conditions


class UpdateSegment(Strict):
    name: SegmentName = None
    description: Description | None = Field(None, description="null clears.")
    conditions: Conditions = None


class SegmentQuery(PageQuery):
    search: Annotated[str, StringConstraints(max_length=200)] | None = Field(
        None, description="Part of the segment name, case-insensitive.")


list_route(bp, "/segments", "list_segments", SegmentQuery, segment_store.page, by=["search"],
           view=views.segment)


@bp.post("/segments")
@body(CreateSegment)
async def create_segment(data: CreateSegment):
    conditions = data.conditions.model_dump(exclude_none=True)
    await checked_filter(conditions)
    doc = await manage_segments.create(db(), caller().workspace_id, name=data.name,
                                       description=data.description, conditions=conditions)
    return one(views.segment(doc), 201)


read_route(bp, "/segments/<uuid:segment_id>", "get_segment", segment_store, "segment", views.segment)


@bp.patch("/segments/<uuid:segment_id>")
@body(UpdateSegment)
async def update_segment(segment_id: str, data: UpdateSegment):
    current = await owned(segment_store, segment_id, "segment")
    doc = await updated(manage_segments.update, segment_id, "segment", await changed_fields(data), current)
    return one(views.segment(doc))


delete_route(bp, "/segments/<uuid:segment_id>", "delete_segment", manage_segments.delete, "segment")


@bp.post("/segments/<uuid:segment_id>/estimate")
async def estimate(segment_id: str):
    """Count the live contacts matching the segment; answers {segment_id, count}."""
    doc = await owned(segment_store, segment_id, "segment")
    condition = segment_rules.compile_conditions(doc["conditions"])
    return one({"segment_id": segment_id,
                "count": await contact_store.count(db(), caller().workspace_id, condition)})


@bp.get("/segments/<uuid:segment_id>/contacts")
@query(PageQuery)
async def segment_contacts(segment_id: str, params: PageQuery):
    doc = await owned(segment_store, segment_id, "segment")
    condition = segment_rules.compile_conditions(doc["conditions"])
    return await contacts_page(condition, params)
