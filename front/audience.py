"""Helpers the audience blueprints (contacts, lists, segments, tags) share: rule
conditions checked against the workspace's tags and lists, list membership as a filter,
member counts, a contact's lists, and finding the contact a request names."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from mongo import contacts as contact_store
from mongo import lists as list_store
from mongo import memberships
from mongo import tags as tag_store
from pipelines import views
from pipelines.audience import segment_rules
from pipelines.core.errors import NotFound, ValidationFailed

from .lookup import found, no_such
from .pagination import PageQuery, paged
from .runtime import caller, db
from .types import json_bytes

MAX_ATTRIBUTES = 100
# One attribute's value, serialised as JSON: a contact's attributes stay within ~1 MB
# (and its events, which carry the contact, far below the store's 16 MB per document).
MAX_ATTRIBUTE_VALUE_BYTES = 10 * 1024


def check_attributes(attributes: dict[str, Any], path: str = "attributes") -> None:
    """Attribute names are what the rule language can address (letters, digits, _ and -);
    each value is at most 10 KB once serialised."""
    if len(attributes) > MAX_ATTRIBUTES:
        raise ValidationFailed(f"{path}: at most {MAX_ATTRIBUTES} attributes.", path=path)
    for name, value in attributes.items():
        where = f"{path}.{name}"
        if not segment_rules.ATTRIBUTE_NAME.match(name):
            raise ValidationFailed(f"{where}: attribute names are 1-64 letters, digits, _ or -, "
                                   "starting with a letter, digit or _.", path=where)
        if json_bytes(value) > MAX_ATTRIBUTE_VALUE_BYTES:
            raise ValidationFailed(f"{where}: a value is at most {MAX_ATTRIBUTE_VALUE_BYTES // 1024} KB "
                                   "once serialised as JSON.", path=where)


async def checked_filter(conditions: dict, path: str = "conditions") -> dict:
    """Compile `conditions` and check that the tags and lists they name exist here: an
    unknown id answers 404 not_found with its `path`, as every other cross-reference does
    (lists must be static: dynamic membership is not stored on contacts, a 400)."""
    compiled = segment_rules.compile_conditions(conditions, path)
    refs = segment_rules.references(conditions, path)
    workspace_id = caller().workspace_id
    if refs["tags"]:
        known = await tag_store.existing_ids(db(), workspace_id, list(refs["tags"]))
        for tag_id, where in refs["tags"].items():
            if tag_id not in known:
                raise NotFound(f"{where}: no tag {tag_id!r} in this workspace.", path=where)
    if refs["lists"]:
        found = {d["_id"]: d for d in await list_store.get_many(db(), workspace_id, list(refs["lists"]))}
        for list_id, where in refs["lists"].items():
            if list_id not in found:
                raise NotFound(f"{where}: no list {list_id!r} in this workspace.", path=where)
            if found[list_id]["type"] != "static":
                raise ValidationFailed(f"{where}: rules can name static lists only.", path=where)
    return compiled


def members_filter(list_doc: dict) -> dict:
    if list_doc["type"] == "static":
        return {"lists": list_doc["_id"]}
    return segment_rules.compile_conditions(list_doc["conditions"])


async def contact_or_404(*, contact_id: str | None = None, email: str | None = None,
                         email_path: str = "contact_email") -> dict:
    """The caller's contact by id (else by email address), else 404 contact_not_found with `path`
    naming the field the request gave it in (`contact_id`, or `email_path`)."""
    workspace_id = caller().workspace_id
    if contact_id is not None:
        return await found(contact_store.get(db(), workspace_id, contact_id), no_such("contact"),
                           code="contact_not_found", path="contact_id")
    return await found(contact_store.find_by_email(db(), workspace_id, email),
                       "No contact with this email in the workspace.", code="contact_not_found", path=email_path)


async def changed_fields(data: BaseModel) -> dict:
    """The fields a PATCH body gave; rule `conditions` among them checked and kept as stored."""
    changes = data.model_dump(include=data.model_fields_set)
    if "conditions" in changes:
        changes["conditions"] = data.conditions.model_dump(exclude_none=True)
        await checked_filter(changes["conditions"])
    return changes


def members_changed(owner: dict, outcome: memberships.Outcome, changed: str, unchanged: str) -> dict:
    """The answer to adding or removing members by id: `owner` ({list_id} or {tag_id}), how many
    `changed` and were `unchanged` already, and the ids that are no live contact."""
    return {**owner, changed: len(outcome.changed), unchanged: len(outcome.unchanged),
            "not_found": outcome.not_found}


async def contacts_page(condition: dict, params: PageQuery) -> dict:
    """One page of the caller's live contacts matching `condition`, in the list shape."""
    items, total = await contact_store.page(db(), caller().workspace_id, condition, limit=params.limit,
                                            offset=params.offset)
    return paged((await contact_views(items), total), params)


async def contact_views(docs: list[dict]) -> list[dict]:
    """Contacts as the API shows them: `tags` as [{id, name}] like `lists` (the spec shows
    only `lists`; docs/audience.md), the page's tag names read at once."""
    names = await tag_store.names(db(), caller().workspace_id, sorted({t for d in docs for t in d.get("tags") or []}))
    return [{**views.contact(d), "tags": views.named_tags(d.get("tags") or [], names)} for d in docs]


async def list_views(docs: list[dict]) -> list[dict]:
    workspace_id = caller().workspace_id
    counted = await memberships.counts(db(), workspace_id, "lists",
                                       [d["_id"] for d in docs if d["type"] == "static"])
    for doc in docs:
        if doc["type"] == "dynamic":
            counted[doc["_id"]] = await contact_store.count(db(), workspace_id, members_filter(doc))
    return [views.contact_list(d, counted[d["_id"]]) for d in docs]


async def contact_lists(contact: dict) -> list[dict]:
    """[{id, name}] of the static lists holding the contact and the dynamic lists it matches."""
    workspace_id = caller().workspace_id
    found = await list_store.get_many(db(), workspace_id, contact["lists"]) if contact["lists"] else []
    for doc in await list_store.dynamic(db(), workspace_id):
        if await contact_store.matches(db(), workspace_id, contact["_id"], members_filter(doc)):
            found.append(doc)
    return [{"id": d["_id"], "name": d["name"]} for d in found]


async def contact_with_lists(contact: dict) -> dict:
    [shown] = await contact_views([contact])
    return {**shown, "lists": await contact_lists(contact)}
