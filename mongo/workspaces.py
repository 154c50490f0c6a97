from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from pipelines.clock import now_iso
from pipelines.ids import new_uuid


async def create(db: AsyncDatabase, name: str, *, from_email: str | None = None,
                 settings: dict | None = None) -> dict:
    doc = {
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


async def get(db: AsyncDatabase, workspace_id: str) -> dict | None:
    return await db.workspaces.find_one({"_id": workspace_id})


async def update_settings(db: AsyncDatabase, workspace_id: str, changes: dict) -> dict | None:
    from pymongo import ReturnDocument
    return await db.workspaces.find_one_and_update(
        {"_id": workspace_id}, {"$set": changes}, return_document=ReturnDocument.AFTER)


async def list_all(db: AsyncDatabase) -> list[dict]:
    return await db.workspaces.find({}, sort=[("created_at", 1)]).to_list()
