from __future__ import annotations

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core import api_keys
from pipelines.core.clock import now_iso
from pipelines.core.documents import ApiKey
from pipelines.core.ids import new_uuid

from .recent import Recent

# by key hash; revoke and set_limits forget every entry (rare, and a key may be cached
# under its hash only)
_RECENT = Recent()


async def create(db: AsyncDatabase, workspace_id: str, *, name: str, sandbox: bool,
                 permissions: list[str], rate_limit: int | None = None,
                 email_rate_limit: int | None = None) -> tuple[str, ApiKey]:
    """Return (the key, shown once; the stored document, which holds only its hash)."""
    key = api_keys.generate_key(sandbox)
    doc: ApiKey = {
        "_id": new_uuid(),
        "workspace_id": workspace_id,
        "name": name,
        "hash": api_keys.hash_key(key),
        "prefix": key[:12],
        "type": "sandbox" if sandbox else "live",
        "permissions": permissions,
        "rate_limit": rate_limit,
        "email_rate_limit": email_rate_limit,
        "revoked": False,
        "created_at": now_iso(),
    }
    await db.api_keys.insert_one(doc)
    return key, doc


async def find_by_key(db: AsyncDatabase, key: str) -> ApiKey | None:
    return await db.api_keys.find_one({"hash": api_keys.hash_key(key)})


async def recent_by_key(db: AsyncDatabase, key: str) -> ApiKey | None:
    """`find_by_key`, answered from this process's last read of it for up to
    recent.FRESH_SECONDS (the request path's authentication). Unknown keys are not kept."""
    digest = api_keys.hash_key(key)
    return await _RECENT.read(db, digest, lambda: db.api_keys.find_one({"hash": digest}))


async def recent_by_id(db: AsyncDatabase, key_id: str) -> ApiKey | None:
    """The key by its id, kept as `recent_by_key` keeps it (a console session's key)."""
    return await _RECENT.read(db, ("id", key_id), lambda: db.api_keys.find_one({"_id": key_id}))


async def list_for(db: AsyncDatabase, workspace_id: str | None = None) -> list[dict]:
    """The keys (of one workspace, or all), oldest first: ApiKey without its `hash`."""
    query = {"workspace_id": workspace_id} if workspace_id else {}
    return await db.api_keys.find(query, {"hash": 0}, sort=[("created_at", 1)]).to_list()


async def revoke(db: AsyncDatabase, key_id: str) -> ApiKey | None:
    doc = await db.api_keys.find_one_and_update(
        {"_id": key_id}, {"$set": {"revoked": True, "revoked_at": now_iso()}},
        return_document=ReturnDocument.AFTER)
    _RECENT.clear()
    return doc


async def set_limits(db: AsyncDatabase, key_id: str, **limits) -> ApiKey | None:
    doc = await db.api_keys.find_one_and_update(
        {"_id": key_id}, {"$set": limits}, return_document=ReturnDocument.AFTER)
    _RECENT.clear()
    return doc
