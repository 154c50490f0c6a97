from __future__ import annotations

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso
from pipelines.core.documents import Workspace
from pipelines.core.ids import new_uuid

from .recent import Recent

_RECENT = Recent()  # by workspace id


async def create(db: AsyncDatabase, name: str, *, from_email: str | None = None,
                 settings: dict | None = None) -> Workspace:
    doc: Workspace = {
        "_id": new_uuid(),
        "name": name,
        "default_from_email": from_email,
        # company_name / company_address feed the merge tags; plan limits live here too.
        "settings": settings or {},
        "monthly_email_limit": None,
        "created_at": now_iso(),
    }
    await db.workspaces.insert_one(doc)
    return doc


async def get(db: AsyncDatabase, workspace_id: str) -> Workspace | None:
    return await db.workspaces.find_one({"_id": workspace_id})


async def recent(db: AsyncDatabase, workspace_id: str) -> Workspace | None:
    """`get`, answered from this process's last read of it for up to recent.FRESH_SECONDS
    (the request path: the caller's workspace). A missing workspace is not kept."""
    return await _RECENT.read(db, workspace_id, lambda: get(db, workspace_id))


async def update_settings(db: AsyncDatabase, workspace_id: str, changes: dict) -> Workspace | None:
    doc = await db.workspaces.find_one_and_update(
        {"_id": workspace_id}, {"$set": changes}, return_document=ReturnDocument.AFTER)
    _RECENT.forget(db, workspace_id)
    return doc


async def list_all(db: AsyncDatabase) -> list[Workspace]:
    return await db.workspaces.find({}, sort=[("created_at", 1)]).to_list()
