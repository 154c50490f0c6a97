"""A workspace's own inbound domains (`inbound_domains`, one per workspace and domain)
and who receives at each (`inbound_domain_claims`, `_id` = the domain: one workspace per
domain, taken when its records verify — so the inbound port finds a recipient's
workspace by `_id`, and a domain named by two workspaces receives for the one that
proved it first, never for both)."""

from __future__ import annotations

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso

from . import documents
from .documents import get_owned, insert_new

INDEXES: dict[str, list] = {
    "inbound_domains": [IndexModel([("workspace_id", ASCENDING), ("domain", ASCENDING)], unique=True,
                                   name="ws_domain_unique")],
}


async def insert(db: AsyncDatabase, doc: dict) -> bool:
    """False when the workspace has this domain already."""
    return await insert_new(db.inbound_domains, doc)


async def get(db: AsyncDatabase, workspace_id: str, domain_id: str) -> dict | None:
    return await get_owned(db.inbound_domains, workspace_id, domain_id)


async def list_page(db: AsyncDatabase, workspace_id: str, *, limit: int, offset: int) -> tuple[list[dict], int]:
    return await documents.page(db.inbound_domains, {"workspace_id": workspace_id}, limit=limit, offset=offset,
                                sort=[("created_at", ASCENDING), ("_id", ASCENDING)])


async def save_check(db: AsyncDatabase, workspace_id: str, domain_id: str, records: list[dict],
                     verified: bool) -> dict | None:
    """A verification run; once verified the domain stays so (a later failing check shows
    what broke in its records)."""
    at = now_iso()
    changes: dict = {"records": records, "last_checked_at": at}
    if verified:
        changes["verified"] = True
    saved = await db.inbound_domains.find_one_and_update(
        {"_id": domain_id, "workspace_id": workspace_id}, {"$set": changes}, return_document=ReturnDocument.AFTER)
    if saved is not None and verified and not saved.get("verified_at"):
        saved = await db.inbound_domains.find_one_and_update(
            {"_id": domain_id, "workspace_id": workspace_id, "verified_at": None}, {"$set": {"verified_at": at}},
            return_document=ReturnDocument.AFTER) or saved
    return saved


async def claim(db: AsyncDatabase, domain: str, workspace_id: str, domain_id: str) -> str:
    """Take `domain` for this workspace unless another has it; the workspace that has it."""
    await insert_new(db.inbound_domain_claims, {"_id": domain, "workspace_id": workspace_id,
                                                "domain_id": domain_id, "claimed_at": now_iso()})
    return await owner(db, domain) or workspace_id


async def owner(db: AsyncDatabase, domain: str) -> str | None:
    """The workspace receiving at `domain` (None: no workspace has verified it)."""
    doc = await db.inbound_domain_claims.find_one({"_id": domain.lower()}, {"workspace_id": 1})
    return None if doc is None else doc["workspace_id"]


async def delete(db: AsyncDatabase, workspace_id: str, domain_id: str) -> bool:
    """The domain removed, and its claim if it was this workspace's (mail to it is then refused)."""
    doc = await db.inbound_domains.find_one_and_delete({"_id": domain_id, "workspace_id": workspace_id})
    if doc is None:
        return False
    await db.inbound_domain_claims.delete_one({"_id": doc["domain"], "workspace_id": workspace_id})
    return True
