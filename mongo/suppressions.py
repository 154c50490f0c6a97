"""The suppression list: addresses a workspace never sends to.

`_id` = "<workspace id>:<lower-cased address>", so "is this address suppressed?" is a
primary-key lookup on both stores (hot: every send asks it) and a second add of the same
address is a duplicate key, not a second document."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from pipelines.audience.addresses import match_key
from pipelines.core.clock import ms_of, now_iso
from pipelines.core.documents import Suppression
from pipelines.messages.mail_streams import MARKETING, blocked_addresses

from . import grouped_reads
from .documents import newest_first

INDEXES: dict[str, list] = {
    "suppressions": [
        IndexModel([("workspace_id", ASCENDING), ("created_at", DESCENDING)], name="ws_created"),
        IndexModel([("workspace_id", ASCENDING), ("reason", ASCENDING)], name="ws_reason"),
        # the console's pages: an aggregate's equalities and a range on the integer, sorted by it
        IndexModel([("workspace_id", ASCENDING), ("created_ms", DESCENDING)], name="ws_created_ms"),
        IndexModel([("workspace_id", ASCENDING), ("reason", ASCENDING), ("created_ms", DESCENDING)],
                   name="ws_reason_created_ms"),
    ],
}


def _key(workspace_id: str, email: str) -> str:
    # match_key: the A-label and Unicode spellings of a domain are one suppression
    return f"{workspace_id}:{match_key(email)}"


def document(workspace_id: str, email: str, reason: str, *, source: str = "api",
             detail: str | None = None) -> Suppression:
    now = now_iso()
    return {"_id": _key(workspace_id, email), "workspace_id": workspace_id, "email": email,
            "email_key": match_key(email), "reason": reason, "source": source,
            "detail": detail or "", "created_at": now, "created_ms": ms_of(now)}


async def add(db: AsyncDatabase, workspace_id: str, email: str, reason: str, *,
              source: str = "api", detail: str | None = None) -> tuple[Suppression, bool]:
    """Suppress an address. Returns (the stored document, whether it was new)."""
    doc = document(workspace_id, email, reason, source=source, detail=detail)
    try:
        await db.suppressions.insert_one(doc)
        return doc, True
    except DuplicateKeyError:
        there = await db.suppressions.find_one({"_id": doc["_id"]})
        assert there is not None, "lifted between the insert and the read"
        return there, False


async def get(db: AsyncDatabase, workspace_id: str, email: str) -> Suppression | None:
    return await db.suppressions.find_one({"_id": _key(workspace_id, email)})


async def remove(db: AsyncDatabase, workspace_id: str, email: str) -> bool:
    result = await db.suppressions.delete_one({"_id": _key(workspace_id, email)})
    return result.deleted_count == 1


async def list_page(db: AsyncDatabase, workspace_id: str, *, reason: str | None,
                    limit: int, offset: int) -> tuple[list[Suppression], int]:
    query: dict = {"workspace_id": workspace_id}
    if reason:
        query["reason"] = reason
    total = await db.suppressions.count_documents(query)
    docs = await db.suppressions.find(query, sort=[("created_at", -1), ("_id", 1)],
                                      skip=offset, limit=limit).to_list()
    return docs, total


async def newest(db: AsyncDatabase, workspace_id: str, *, reason: str | None, after: tuple[int, str] | None,
                 limit: int) -> list[Suppression]:
    """The console's page: newest first after the cursor `after`, without a count, from
    `ws_created_ms` / `ws_reason_created_ms` (documents.newest_first)."""
    where = {"workspace_id": workspace_id, **({"reason": reason} if reason else {})}
    return await newest_first(db.suppressions, where, after, limit)


async def reasons_among(db: AsyncDatabase, workspace_id: str, emails: list[str]) -> dict[str, str]:
    """The addresses (as given) among `emails` that are on the workspace's list, each with
    its suppression reason. Read with the lookups made at the same time (mongo/grouped_reads):
    one read for a front's burst of single sends."""
    if not emails:
        return {}
    by_key: dict[str, list[str]] = {}
    for email in emails:
        by_key.setdefault(_key(workspace_id, email), []).append(email)
    docs: list[dict] = await grouped_reads.find_in(db, "suppressions", "_id", by_key,  # _id and reason only
                                                   projection={"_id": 1, "reason": 1})
    return {email: d.get("reason") or "manual" for d in docs for email in by_key.get(d["_id"], [])}


async def suppressed_among(db: AsyncDatabase, workspace_id: str, emails: list[str], *,
                           stream: str = MARKETING) -> set[str]:
    """The addresses (as given) among `emails` that mail of `stream` may not go to
    (pipelines.messages.mail_streams: a marketing unsubscribe does not hold back transactional mail)."""
    return blocked_addresses(stream, await reasons_among(db, workspace_id, emails))
