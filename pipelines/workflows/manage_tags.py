"""A tag's commands (POST, PATCH and DELETE /tags…, assigning and removing it): names are
unique in a workspace, so a create or rename the store refuses is 409 duplicate."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import memberships, tags
from pipelines.core.errors import Conflict


def _duplicate(name: str) -> Conflict:
    return Conflict(f"A tag named {name!r} already exists in this workspace.", code="duplicate")


async def create(db: AsyncDatabase, workspace_id: str, *, name: str, color: str, description: str | None) -> dict:
    doc = await tags.create(db, workspace_id, name=name, color=color, description=description)
    if doc is None:
        raise _duplicate(name)
    return doc


async def update(db: AsyncDatabase, workspace_id: str, tag_id: str, changes: dict) -> dict:
    """The tag after `changes`; the caller has loaded it, so a refusal is the new name taken."""
    doc = await tags.update(db, workspace_id, tag_id, changes)
    if doc is None:
        raise _duplicate(changes["name"])
    return doc


async def delete(db: AsyncDatabase, workspace_id: str, tag_id: str) -> bool:
    return await tags.delete(db, workspace_id, tag_id)


async def assign(db: AsyncDatabase, tag: dict, contact_ids: list[str]) -> memberships.Outcome:
    return await tags.assign(db, tag, contact_ids)


async def unassign(db: AsyncDatabase, tag: dict, contact_ids: list[str]) -> memberships.Outcome:
    return await memberships.remove(db, tag["workspace_id"], "tags", tag["_id"], contact_ids)
