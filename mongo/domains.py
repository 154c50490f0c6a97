"""Sending domains of a workspace."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase


async def verified_map(db: AsyncDatabase, workspace_id: str) -> dict[str, bool]:
    """Each domain the workspace added → whether it is verified (for the sender rules)."""
    docs = await db.domains.find({"workspace_id": workspace_id}, {"domain": 1, "verified": 1}).to_list()
    return {d["domain"]: bool(d.get("verified")) for d in docs}
