"""Segments: `{_id, workspace_id, name, description, conditions, created_at, updated_at}`.
`conditions` are kept as given (validated by pipelines.segment_rules at save) and compiled
to a filter on each use, so a change to the compiler applies to every stored segment."""

from __future__ import annotations

import re

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.clock import now_iso
from pipelines.ids import new_uuid

INDEXES: dict[str, list] = {
    "segments": [IndexModel([("workspace_id", ASCENDING), ("created_at", DESCENDING)], name="ws_created")],
}


def view(doc: dict) -> dict:
    return {"id": doc["_id"], "name": doc["name"], "description": doc.get("description"),
            "conditions": doc["conditions"], "created_at": doc["created_at"], "updated_at": doc["updated_at"]}


async def create(db: AsyncDatabase, workspace_id: str, *, name: str, description: str | None,
                 conditions: dict) -> dict:
    now = now_iso()
    doc = {"_id": new_uuid(), "workspace_id": workspace_id, "name": name, "description": description,
           "conditions": conditions, "created_at": now, "updated_at": now}
    await db.segments.insert_one(doc)
    return doc


async def get(db: AsyncDatabase, workspace_id: str, segment_id: str) -> dict | None:
    return await db.segments.find_one({"_id": segment_id, "workspace_id": workspace_id})


async def page(db: AsyncDatabase, workspace_id: str, search: str | None, *,
               limit: int, offset: int) -> tuple[list[dict], int]:
    query: dict = {"workspace_id": workspace_id}
    if search:
        query["name"] = {"$regex": re.escape(search), "$options": "i"}
    items = await db.segments.find(query, sort=[("created_at", DESCENDING), ("_id", ASCENDING)],
                                   skip=offset, limit=limit).to_list()
    return items, await db.segments.count_documents(query)


async def update(db: AsyncDatabase, workspace_id: str, segment_id: str, changes: dict) -> dict | None:
    return await db.segments.find_one_and_update(
        {"_id": segment_id, "workspace_id": workspace_id},
        {"$set": {**changes, "updated_at": now_iso()}}, return_document=ReturnDocument.AFTER)


async def delete(db: AsyncDatabase, workspace_id: str, segment_id: str) -> bool:
    result = await db.segments.delete_one({"_id": segment_id, "workspace_id": workspace_id})
    return result.deleted_count == 1
