"""Lists: `{_id, workspace_id, name, description, type, conditions, created_at, updated_at}`.

`type` is `static` (members are the contacts whose `lists` array holds the list id) or
`dynamic` (members are the contacts matching `conditions`, the segment rule language;
`conditions` is None for static lists). Adding and removing members of a static list
records list.member_added / list.member_removed and contact.subscribed /
contact.unsubscribed (with the list in `data`), per contact that changed."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from . import documents, memberships, outbox
from .contacts import subscription_event
from .documents import NEWEST_FIRST, get_owned, name_search, update_owned

TYPES = ("static", "dynamic")

INDEXES: dict[str, list] = {
    "lists": [IndexModel([("workspace_id", ASCENDING), ("created_at", DESCENDING)], name="ws_created"),
              IndexModel([("workspace_id", ASCENDING), ("type", ASCENDING)], name="ws_type")],
}


async def create(db: AsyncDatabase, workspace_id: str, *, name: str, description: str | None,
                 type: str, conditions: dict | None) -> dict:
    return await documents.create(db.lists, workspace_id, {"name": name, "description": description,
                                                            "type": type, "conditions": conditions})


async def get(db: AsyncDatabase, workspace_id: str, list_id: str) -> dict | None:
    return await get_owned(db.lists, workspace_id, list_id)


async def get_many(db: AsyncDatabase, workspace_id: str, list_ids: list[str]) -> list[dict]:
    return await db.lists.find({"_id": {"$in": list(list_ids)}, "workspace_id": workspace_id},
                               sort=[("created_at", ASCENDING)]).to_list()


async def dynamic(db: AsyncDatabase, workspace_id: str) -> list[dict]:
    return await db.lists.find({"workspace_id": workspace_id, "type": "dynamic"},
                               sort=[("created_at", ASCENDING)]).to_list()


async def page(db: AsyncDatabase, workspace_id: str, *, type: str | None, search: str | None,
               limit: int, offset: int) -> tuple[list[dict], int]:
    query = name_search({"workspace_id": workspace_id, **({"type": type} if type else {})}, search)
    return await documents.page(db.lists, query, sort=NEWEST_FIRST, limit=limit, offset=offset)


async def update(db: AsyncDatabase, workspace_id: str, list_id: str, changes: dict) -> dict | None:
    return await update_owned(db.lists, workspace_id, list_id, changes)


async def delete(db: AsyncDatabase, workspace_id: str, list_id: str) -> bool:
    """Delete the list; its contacts stay, only the membership is pulled from them."""
    return await memberships.delete_with_memberships(db, "lists", workspace_id, list_id)


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
