"""Segments: `{_id, workspace_id, name, description, conditions, created_at, updated_at}`.
`conditions` are kept as given (validated by pipelines.audience.segment_rules at save) and compiled
to a filter on each use, so a change to the compiler applies to every stored segment."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from . import documents
from .documents import NEWEST_FIRST, delete_owned, get_owned, name_search, update_owned

INDEXES: dict[str, list] = {
    "segments": [IndexModel([("workspace_id", ASCENDING), ("created_at", DESCENDING)], name="ws_created")],
}


async def create(db: AsyncDatabase, workspace_id: str, *, name: str, description: str | None,
                 conditions: dict) -> dict:
    return await documents.create(db.segments, workspace_id,
                                  {"name": name, "description": description, "conditions": conditions})


async def get(db: AsyncDatabase, workspace_id: str, segment_id: str) -> dict | None:
    return await get_owned(db.segments, workspace_id, segment_id)


async def page(db: AsyncDatabase, workspace_id: str, search: str | None, *,
               limit: int, offset: int) -> tuple[list[dict], int]:
    query = name_search({"workspace_id": workspace_id}, search)
    return await documents.page(db.segments, query, sort=NEWEST_FIRST, limit=limit, offset=offset)


async def update(db: AsyncDatabase, workspace_id: str, segment_id: str, changes: dict) -> dict | None:
    return await update_owned(db.segments, workspace_id, segment_id, changes)


async def delete(db: AsyncDatabase, workspace_id: str, segment_id: str) -> bool:
    return await delete_owned(db.segments, workspace_id, segment_id)
