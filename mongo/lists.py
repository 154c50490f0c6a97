"""Lists: `{_id, workspace_id, name, description, type, conditions, created_at, updated_at}`.

`type` is `static` (members are the contacts whose `lists` array holds the list id) or
`dynamic` (members are the contacts matching `conditions`, the segment rule language;
`conditions` is None for static lists). Adding and removing members of a static list
records list.member_added / list.member_removed and contact.subscribed /
contact.unsubscribed (with the list in `data`), per contact that changed."""

from __future__ import annotations

import re

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.clock import now_iso
from pipelines.ids import new_uuid

from . import memberships, outbox
from .contacts import subscription_event

TYPES = ("static", "dynamic")

INDEXES: dict[str, list] = {
    "lists": [IndexModel([("workspace_id", ASCENDING), ("created_at", DESCENDING)], name="ws_created"),
              IndexModel([("workspace_id", ASCENDING), ("type", ASCENDING)], name="ws_type")],
}


def view(doc: dict, member_count: int) -> dict:
    return {"id": doc["_id"], "name": doc["name"], "description": doc.get("description"),
            "type": doc["type"], "conditions": doc.get("conditions"), "member_count": member_count,
            "created_at": doc["created_at"], "updated_at": doc["updated_at"]}


async def create(db: AsyncDatabase, workspace_id: str, *, name: str, description: str | None,
                 type: str, conditions: dict | None) -> dict:
    now = now_iso()
    doc = {"_id": new_uuid(), "workspace_id": workspace_id, "name": name, "description": description,
           "type": type, "conditions": conditions, "created_at": now, "updated_at": now}
    await db.lists.insert_one(doc)
    return doc


async def get(db: AsyncDatabase, workspace_id: str, list_id: str) -> dict | None:
    return await db.lists.find_one({"_id": list_id, "workspace_id": workspace_id})


async def get_many(db: AsyncDatabase, workspace_id: str, list_ids: list[str]) -> list[dict]:
    return await db.lists.find({"_id": {"$in": list(list_ids)}, "workspace_id": workspace_id},
                               sort=[("created_at", ASCENDING)]).to_list()


async def dynamic(db: AsyncDatabase, workspace_id: str) -> list[dict]:
    return await db.lists.find({"workspace_id": workspace_id, "type": "dynamic"},
                               sort=[("created_at", ASCENDING)]).to_list()


async def page(db: AsyncDatabase, workspace_id: str, *, type: str | None, search: str | None,
               limit: int, offset: int) -> tuple[list[dict], int]:
    query: dict = {"workspace_id": workspace_id}
    if type:
        query["type"] = type
    if search:
        query["name"] = {"$regex": re.escape(search), "$options": "i"}
    items = await db.lists.find(query, sort=[("created_at", DESCENDING), ("_id", ASCENDING)],
                                skip=offset, limit=limit).to_list()
    return items, await db.lists.count_documents(query)


async def update(db: AsyncDatabase, workspace_id: str, list_id: str, changes: dict) -> dict | None:
    return await db.lists.find_one_and_update(
        {"_id": list_id, "workspace_id": workspace_id},
        {"$set": {**changes, "updated_at": now_iso()}}, return_document=ReturnDocument.AFTER)


async def delete(db: AsyncDatabase, workspace_id: str, list_id: str) -> bool:
    """Delete the list; its contacts stay, only the membership is pulled from them."""
    result = await db.lists.delete_one({"_id": list_id, "workspace_id": workspace_id})
    if result.deleted_count != 1:
        return False
    await memberships.drop_everywhere(db, workspace_id, "lists", list_id)
    return True


def member_event(list_doc: dict, event: str, contact: dict) -> dict:
    """list.member_added / list.member_removed for one contact ({_id, email})."""
    return outbox.event_document(list_doc["workspace_id"], event, {
        "list": {"id": list_doc["_id"], "name": list_doc["name"]},
        "contact": {"id": contact["_id"], "email": contact["email"]}})


def joining_events(list_doc: dict, contact: dict, reason: str) -> list[dict]:
    """What a contact joining a static list records: list.member_added and contact.subscribed."""
    return [member_event(list_doc, "list.member_added", contact),
            subscription_event(list_doc["workspace_id"], contact, reason, subscribed=True, list_doc=list_doc)]


def leaving_events(list_doc: dict, contact: dict, reason: str) -> list[dict]:
    return [member_event(list_doc, "list.member_removed", contact),
            subscription_event(list_doc["workspace_id"], contact, reason, subscribed=False, list_doc=list_doc)]


async def add_members(db: AsyncDatabase, list_doc: dict, contact_ids: list[str],
                      reason: str = "api") -> memberships.Outcome:
    return await memberships.add(db, list_doc["workspace_id"], "lists", list_doc["_id"], contact_ids,
                                 event_for=lambda c: joining_events(list_doc, c, reason))


async def remove_members(db: AsyncDatabase, list_doc: dict, contact_ids: list[str],
                         reason: str = "api") -> memberships.Outcome:
    return await memberships.remove(db, list_doc["workspace_id"], "lists", list_doc["_id"], contact_ids,
                                    event_for=lambda c: leaving_events(list_doc, c, reason))
