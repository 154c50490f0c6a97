"""Tags: `{_id, workspace_id, name, name_key, color, description, created_at, updated_at}`.

Names are unique per workspace compared case-insensitively (`name_key` is the lower-cased
name under a unique index). Assignments live on the contacts (`contacts.tags`), see
mongo/memberships.py; contact_count is counted from there."""

from __future__ import annotations

from pymongo import ASCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from pipelines.automations.triggers import TAG_ADDED_EVENT
from pipelines.core.clock import now_iso
from pipelines.core.ids import new_uuid

from . import documents, memberships, outbox
from .documents import get_owned, insert_new, name_search, update_owned

INDEXES: dict[str, list] = {
    "tags": [IndexModel([("workspace_id", ASCENDING), ("name_key", ASCENDING)], unique=True,
                        name="ws_name_unique")],
}


async def create(db: AsyncDatabase, workspace_id: str, *, name: str, color: str,
                 description: str | None) -> dict | None:
    """The new tag, or None if the workspace already has a tag of that name."""
    now = now_iso()
    doc = {"_id": new_uuid(), "workspace_id": workspace_id, "name": name, "name_key": name.lower(),
           "color": color, "description": description, "created_at": now, "updated_at": now}
    return doc if await insert_new(db.tags, doc) else None


async def get(db: AsyncDatabase, workspace_id: str, tag_id: str) -> dict | None:
    return await get_owned(db.tags, workspace_id, tag_id)


async def find_by_name(db: AsyncDatabase, workspace_id: str, name: str) -> dict | None:
    return await db.tags.find_one({"workspace_id": workspace_id, "name_key": name.lower()})


async def assign(db: AsyncDatabase, tag: dict, contact_ids: list[str]) -> memberships.Outcome:
    """Tag contacts; each contact newly tagged carries `contact.tag_added` (an internal event:
    automations with a tag_added trigger read it; not in spec §6, so never delivered)."""
    def event_for(contact: dict) -> list[dict]:
        return [outbox.event_document(tag["workspace_id"], TAG_ADDED_EVENT, {
            "tag": {"id": tag["_id"], "name": tag["name"]},
            "contact": {"id": contact["_id"], "email": contact["email"]}})]
    return await memberships.add(db, tag["workspace_id"], "tags", tag["_id"], contact_ids, event_for=event_for)


async def existing_ids(db: AsyncDatabase, workspace_id: str, tag_ids: list[str]) -> set[str]:
    return set(await names(db, workspace_id, tag_ids))


async def names(db: AsyncDatabase, workspace_id: str | None, tag_ids: list[str]) -> dict[str, str]:
    """id → name of the tags among `tag_ids` (of that workspace; None: of any, for ids
    read from a workspace's own documents). One read by `_id`."""
    if not tag_ids:
        return {}
    condition: dict = {"_id": {"$in": list(tag_ids)}}
    if workspace_id is not None:
        condition["workspace_id"] = workspace_id
    return {d["_id"]: d["name"] for d in await db.tags.find(condition, {"name": 1}).to_list()}


async def page(db: AsyncDatabase, workspace_id: str, search: str | None, *,
               limit: int, offset: int) -> tuple[list[dict], int]:
    query = name_search({"workspace_id": workspace_id}, search)
    return await documents.page(db.tags, query, sort=[("name_key", ASCENDING), ("_id", ASCENDING)],
                                limit=limit, offset=offset)


async def update(db: AsyncDatabase, workspace_id: str, tag_id: str, changes: dict) -> dict | None:
    """Apply `changes` (name, color, description); None if the new name is taken."""
    if "name" in changes:
        changes = {**changes, "name_key": changes["name"].lower()}
    try:
        return await update_owned(db.tags, workspace_id, tag_id, changes)
    except DuplicateKeyError:
        return None


async def delete(db: AsyncDatabase, workspace_id: str, tag_id: str) -> bool:
    """Delete the tag and remove it from every contact (cascade)."""
    return await memberships.delete_with_memberships(db, "tags", workspace_id, tag_id)
