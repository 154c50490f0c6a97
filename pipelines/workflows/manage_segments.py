"""A segment's commands (POST, PATCH and DELETE /segments…); the route has compiled the
conditions and checked the tags and lists they name."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import segments


async def create(db: AsyncDatabase, workspace_id: str, *, name: str, description: str | None,
                 conditions: dict) -> dict:
    return await segments.create(db, workspace_id, name=name, description=description, conditions=conditions)


async def update(db: AsyncDatabase, workspace_id: str, segment_id: str, changes: dict) -> dict | None:
    return await segments.update(db, workspace_id, segment_id, changes)


async def delete(db: AsyncDatabase, workspace_id: str, segment_id: str) -> bool:
    return await segments.delete(db, workspace_id, segment_id)
