"""Templates (`templates`, the current state) and their history (`template_versions`).

Each version is its own document, `_id` = "<template id>:<n>" (never an array of
sub-documents on the template: the embedded store corrupts `$push`ed sub-documents, and a
256 KB html per version would soon outgrow a document anyway). A change bumps `version`
on the template atomically (find_one_and_update with `$inc`), so two concurrent PATCHes get
distinct numbers, then writes that version's document with the content it produced."""

from __future__ import annotations

import re

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso
from pipelines.core.documents import Template, TemplateVersion
from pipelines.core.ids import new_uuid

from . import grouped_reads
from .documents import get_owned

INDEXES: dict[str, list] = {
    "templates": [IndexModel([("workspace_id", ASCENDING), ("deleted", ASCENDING), ("created_at", DESCENDING)],
                             name="ws_live_created")],
    "template_versions": [IndexModel([("template_id", ASCENDING), ("version", DESCENDING)],
                                     name="template_version")],
}

CONTENT_FIELDS = ("name", "description", "html", "json_structure")


def version_id(template_id: str, version: int) -> str:
    return f"{template_id}:{version}"


def _version_doc(template: Template, at: str, restored_from: int | None) -> TemplateVersion:
    return {"_id": version_id(template["_id"], template["version"]), "template_id": template["_id"],
            "workspace_id": template["workspace_id"], "version": template["version"],
            "name": template["name"], "description": template["description"], "html": template["html"],
            "json_structure": template["json_structure"], "restored_from": restored_from, "created_at": at}


async def create(db: AsyncDatabase, workspace_id: str, content: dict) -> Template:
    at = now_iso()
    doc: Template = {"_id": new_uuid(), "workspace_id": workspace_id, "name": content.get("name"),
                     "description": content.get("description"), "html": content.get("html"),
                     "json_structure": content.get("json_structure"),
                     "version": 1, "deleted": False, "deleted_at": None, "created_at": at, "updated_at": at}
    await db.templates.insert_one(doc)
    await db.template_versions.insert_one(_version_doc(doc, at, None))
    return doc


async def get(db: AsyncDatabase, workspace_id: str, template_id: str) -> Template | None:
    """The live template (a soft-deleted one is gone for every caller)."""
    return await get_owned(db.templates, workspace_id, template_id, deleted=False)


async def list_page(db: AsyncDatabase, workspace_id: str, *, search: str | None, limit: int,
                    offset: int) -> tuple[list[dict], int]:
    """A page of live templates, without their content (html, json_structure)."""
    filters: dict = {"workspace_id": workspace_id, "deleted": False}
    if search:
        filters["name"] = {"$regex": re.escape(search), "$options": "i"}
    docs = await db.templates.find(filters, {"html": 0, "json_structure": 0}, sort=[("created_at", -1), ("_id", 1)],
                                   skip=offset, limit=limit).to_list()
    return docs, await db.templates.count_documents(filters)


async def update(db: AsyncDatabase, workspace_id: str, template_id: str, changes: dict, *,
                 restored_from: int | None = None) -> Template | None:
    """Apply `changes` (content fields) as a new version; None if there is no live template."""
    at = now_iso()
    doc = await db.templates.find_one_and_update(
        {"_id": template_id, "workspace_id": workspace_id, "deleted": False},
        {"$set": {**changes, "updated_at": at}, "$inc": {"version": 1}},
        return_document=ReturnDocument.AFTER)
    if doc is not None:
        await db.template_versions.insert_one(_version_doc(doc, at, restored_from))
    return doc


async def soft_delete(db: AsyncDatabase, workspace_id: str, template_id: str) -> bool:
    at = now_iso()
    result = await db.templates.update_one(
        {"_id": template_id, "workspace_id": workspace_id, "deleted": False},
        {"$set": {"deleted": True, "deleted_at": at, "updated_at": at}})
    return result.modified_count == 1


async def list_versions(db: AsyncDatabase, workspace_id: str, template_id: str, *, limit: int,
                        offset: int) -> tuple[list[dict], int]:
    """A page of the template's versions, newest first, without their content (html, json_structure)."""
    filters = {"template_id": template_id, "workspace_id": workspace_id}
    docs = await db.template_versions.find(filters, {"html": 0, "json_structure": 0}, sort=[("version", -1)],
                                           skip=offset, limit=limit).to_list()
    return docs, await db.template_versions.count_documents(filters)


async def get_version(db: AsyncDatabase, workspace_id: str, template_id: str,
                      version: int) -> TemplateVersion | None:
    return await db.template_versions.find_one({"_id": version_id(template_id, version),
                                                "workspace_id": workspace_id})


async def load_versions(db: AsyncDatabase, keys: list[tuple[str, int | None]],
                        ) -> dict[tuple[str, int | None], TemplateVersion | Template]:
    """The exact versions messages were sent with, by (template id, version), for rendering.
    A version document missing after a crash between the two writes of `update` is
    stood in for by the template itself when it is still at that version."""
    wanted: dict[str, tuple[str, int | None]] = {version_id(t, v): (t, v) for t, v in keys if v is not None}
    if not wanted:
        return {}
    stored: list[TemplateVersion] = await grouped_reads.find_in(db, "template_versions", "_id", wanted)
    found: dict[tuple[str, int | None], TemplateVersion | Template] = {wanted[d["_id"]]: d for d in stored}
    missing = [k for k in wanted.values() if k not in found]
    if missing:
        templates: list[Template] = await db.templates.find({"_id": {"$in": [t for t, _ in missing]}}).to_list()
        for template in templates:
            if (template["_id"], template["version"]) in missing:
                found[(template["_id"], template["version"])] = template
    return found
