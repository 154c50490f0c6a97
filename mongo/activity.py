"""The workspace activity log: what was done to a workspace's data in bulk, by which key.

`{_id, workspace_id, action, key_id, details, at}`. Actions so far:
`contacts.delete_all` (details: deletion_id, count, restorable_until) and
`contacts.restore` (details: deletion_id, restored, skipped)."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso
from pipelines.core.ids import new_uuid

INDEXES: dict[str, list] = {
    "activity": [IndexModel([("workspace_id", ASCENDING), ("at", DESCENDING)], name="ws_at"),
                 IndexModel([("workspace_id", ASCENDING), ("action", ASCENDING), ("at", DESCENDING)],
                            name="ws_action_at"),
                 # the scheduler's purge of delete-alls past their restore window (all workspaces)
                 # (on `purge_ms`, the integer twin of details.restorable_until while unpurged:
                 # a date-like string in a filter makes the embedded store read every entry)
                 IndexModel([("purge_ms", ASCENDING)], name="purge_ms")],
}


async def record(db: AsyncDatabase, workspace_id: str, action: str, key_id: str | None,
                 details: dict, *, fields: dict | None = None) -> dict:
    """`fields`: top-level fields beside the details, for the store's own use (not shown)."""
    doc = {"_id": new_uuid(), "workspace_id": workspace_id, "action": action, "key_id": key_id,
           "details": details, "at": now_iso(), **(fields or {})}
    await db.activity.insert_one(doc)
    return doc


async def page(db: AsyncDatabase, workspace_id: str, action: str | None, *,
               limit: int, offset: int) -> tuple[list[dict], int]:
    query: dict = {"workspace_id": workspace_id}
    if action:
        query["action"] = action
    items = await db.activity.find(query, sort=[("at", DESCENDING), ("_id", ASCENDING)],
                                   skip=offset, limit=limit).to_list()
    return items, await db.activity.count_documents(query)


async def latest(db: AsyncDatabase, workspace_id: str, action: str) -> dict | None:
    found = await db.activity.find({"workspace_id": workspace_id, "action": action},
                                   sort=[("at", DESCENDING)], limit=1).to_list()
    return found[0] if found else None


async def find_detail(db: AsyncDatabase, workspace_id: str, action: str, key: str, value: str) -> dict | None:
    return await db.activity.find_one({"workspace_id": workspace_id, "action": action,
                                       f"details.{key}": value})
