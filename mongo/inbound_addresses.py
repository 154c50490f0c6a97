"""`inbound_addresses`: each workspace's inbound token (`_id` = the token, so the inbound
port finds a recipient's workspace by `_id`), one per workspace (a unique index on
`workspace_id`: two first uses at once keep one)."""

from __future__ import annotations

from pymongo import ASCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso

from .documents import insert_new

INDEXES: dict[str, list] = {
    "inbound_addresses": [IndexModel([("workspace_id", ASCENDING)], unique=True, name="workspace_unique")],
}


async def token_of(db: AsyncDatabase, workspace_id: str) -> str | None:
    doc = await db.inbound_addresses.find_one({"workspace_id": workspace_id}, {"_id": 1})
    return None if doc is None else doc["_id"]


async def workspace_of(db: AsyncDatabase, token: str) -> str | None:
    doc = await db.inbound_addresses.find_one({"_id": token}, {"workspace_id": 1})
    return None if doc is None else doc["workspace_id"]


async def insert(db: AsyncDatabase, workspace_id: str, token: str) -> bool:
    """False when the workspace has a token already (or, at 80 bits, never: the token is taken)."""
    return await insert_new(db.inbound_addresses, {"_id": token, "workspace_id": workspace_id,
                                                   "created_at": now_iso()})
