"""Suppress an address by hand, or lift a suppression (POST and DELETE /suppressions…).
An address is suppressed once per workspace: adding it again is 409 duplicate, saying why
it is there already."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import suppressions
from pipelines.core.documents import Suppression
from pipelines.core.errors import Conflict


async def add(db: AsyncDatabase, workspace_id: str, email: str, reason: str) -> Suppression:
    doc, created = await suppressions.add(db, workspace_id, email, reason)
    if not created:
        raise Conflict(f"{email} is already suppressed ({doc['reason']}).", code="duplicate", path="email")
    return doc


async def remove(db: AsyncDatabase, workspace_id: str, address: str) -> bool:
    """False when the (normalised) address was not suppressed."""
    return await suppressions.remove(db, workspace_id, address)
