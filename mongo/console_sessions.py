"""Console sessions (front/console/): one document per signed-in browser.

`_id` is the SHA-256 of the session's cookie value, so the cookie is never stored and a
request finds its session by primary key. A session names who signed in — a workspace's
API key (`key_id`, `workspace_id`) or an operator (`operator_id`) — its CSRF token, and
when it ends (`expires_ms`, epoch ms: an integer, since a date-like string in a filter makes
the embedded store read every document). The scheduler purges ended sessions
(ops/store_jobs.purge_expired); a request also refuses one that has ended."""

from __future__ import annotations

from pymongo import ASCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso, now_ms

INDEXES: dict[str, list] = {
    "console_sessions": [IndexModel([("expires_ms", ASCENDING)], name="expiry_ms")],
}


async def insert(db: AsyncDatabase, session_id: str, *, csrf: str, expires_ms: int, workspace_id: str | None = None,
                 key_id: str | None = None, operator_id: str | None = None) -> dict:
    doc = {"_id": session_id, "csrf": csrf, "expires_ms": expires_ms, "created_at": now_iso(),
           "workspace_id": workspace_id, "key_id": key_id, "operator_id": operator_id}
    await db.console_sessions.insert_one(doc)
    return doc


async def live(db: AsyncDatabase, session_id: str) -> dict | None:
    """The session, unless it has ended."""
    doc = await db.console_sessions.find_one({"_id": session_id})
    return doc if doc is not None and doc["expires_ms"] > now_ms() else None


async def delete(db: AsyncDatabase, session_id: str) -> bool:
    return (await db.console_sessions.delete_one({"_id": session_id})).deleted_count == 1


async def purge_expired(db: AsyncDatabase) -> int:
    return (await db.console_sessions.delete_many({"expires_ms": {"$lt": now_ms()}})).deleted_count
