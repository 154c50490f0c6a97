"""Sending domains of a workspace, and the key material the render step signs with.

A domain document: `_id` (uuid), workspace_id, domain, verified (bool), verified_at,
records (the DNS records to publish, with their last check), dkim_selector,
dkim_private_key (sealed), dkim_public_key, verification_token, return_path_host
(`pr-bounces.<domain>`), return_path_verified (the last check's answer: bounces must reach
us through it now, so unlike `verified` it does not stick), dmarc (the recommended record
with the last check's answer, pipelines/domains/dns_records.py; absent on domains added before
it), created_at, last_checked_at.
The unique (workspace_id, domain) index makes a second add a duplicate."""

from __future__ import annotations

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso

from .documents import get_owned, insert_new
from .recent import Recent

# (workspace_id, domain) unique lives in mongo/indexes.py
INDEXES: dict[str, list] = {
    "domains": [IndexModel([("return_path_host", ASCENDING)], name="return_path_host")],
}
# verified_map by workspace id: every send asks it. Writes here forget their workspace's.
_RECENT = Recent()


async def verified_map(db: AsyncDatabase, workspace_id: str) -> dict[str, bool]:
    """Each domain the workspace added → whether it is verified (for the sender rules), as
    this process last read it within recent.FRESH_SECONDS."""
    async def load() -> dict[str, bool]:
        docs = await db.domains.find({"workspace_id": workspace_id}, {"domain": 1, "verified": 1}).to_list()
        return {d["domain"]: bool(d.get("verified")) for d in docs}
    return dict(await _RECENT.read(db, workspace_id, load))


async def insert(db: AsyncDatabase, doc: dict) -> bool:
    """False when the workspace already has this domain."""
    try:
        return await insert_new(db.domains, doc)
    finally:
        _RECENT.forget(db, doc["workspace_id"])


async def get(db: AsyncDatabase, workspace_id: str, domain_id: str) -> dict | None:
    return await get_owned(db.domains, workspace_id, domain_id)


async def list_page(db: AsyncDatabase, workspace_id: str, *, limit: int, offset: int) -> tuple[list[dict], int]:
    query = {"workspace_id": workspace_id}
    total = await db.domains.count_documents(query)
    docs = await db.domains.find(query, sort=[("created_at", 1), ("_id", 1)], skip=offset,
                                 limit=limit).to_list()
    return docs, total


async def delete(db: AsyncDatabase, workspace_id: str, domain_id: str) -> bool:
    result = await db.domains.delete_one({"_id": domain_id, "workspace_id": workspace_id})
    _RECENT.forget(db, workspace_id)
    return result.deleted_count == 1


async def save_check(db: AsyncDatabase, workspace_id: str, domain_id: str, *, records: list[dict],
                     verified: bool, return_path_host: str, return_path_verified: bool,
                     dmarc: dict) -> dict | None:
    """Store a verification run. Once verified a domain stays verified: a later failed check
    updates the records' status (so the customer sees what broke) but does not stop mail.
    The return path and the DMARC record follow the last check."""
    at = now_iso()
    changes: dict = {"records": records, "last_checked_at": at, "return_path_host": return_path_host,
                     "return_path_verified": return_path_verified, "dmarc": dmarc}
    if verified:
        changes.update(verified=True)
    current = await db.domains.find_one({"_id": domain_id, "workspace_id": workspace_id},
                                        {"verified_at": 1})
    if current is None:
        return None
    if verified and not current.get("verified_at"):
        changes["verified_at"] = at
    saved = await db.domains.find_one_and_update(
        {"_id": domain_id, "workspace_id": workspace_id}, {"$set": changes},
        return_document=ReturnDocument.AFTER)
    _RECENT.forget(db, workspace_id)
    return saved


async def signing_keys(db: AsyncDatabase, pairs: set[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    """(workspace_id, domain) → {selector, sealed, return_path} for verified domains among
    `pairs`; `return_path` is the return-path host when its record checked out, else None."""
    if not pairs:
        return {}
    workspaces = list({ws for ws, _ in pairs})
    docs = await db.domains.find(
        {"workspace_id": {"$in": workspaces}, "domain": {"$in": list({d for _, d in pairs})},
         "verified": True},
        {"workspace_id": 1, "domain": 1, "dkim_selector": 1, "dkim_private_key": 1, "return_path_host": 1,
         "return_path_verified": 1}).to_list()
    return {(d["workspace_id"], d["domain"]): {
                "selector": d["dkim_selector"], "sealed": d["dkim_private_key"],
                "return_path": d.get("return_path_host") if d.get("return_path_verified") else None}
            for d in docs if (d["workspace_id"], d["domain"]) in pairs}


async def is_return_path_host(db: AsyncDatabase, host: str) -> bool:
    """Whether `host` is some workspace's domain's return-path host (the inbound receiver
    accepts bounces there)."""
    return await db.domains.find_one({"return_path_host": host.lower()}, {"_id": 1}) is not None


async def all_records(db: AsyncDatabase) -> list[dict]:
    """Every workspace's domains with their DNS records, for the operator's DKIM export
    (a full read: an operator command, not a request path)."""
    return await db.domains.find({}, {"domain": 1, "records": 1}, sort=[("domain", 1), ("_id", 1)]).to_list()
