"""A list's commands (POST, PATCH and DELETE /lists…, adding and removing members). The
route has checked the body and the conditions' references; deleting a list pulls it from
its contacts, which stay."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import lists, memberships


async def create(db: AsyncDatabase, workspace_id: str, *, name: str, description: str | None, type: str,
                 conditions: dict | None) -> dict:
    return await lists.create(db, workspace_id, name=name, description=description, type=type,
                              conditions=conditions)


async def update(db: AsyncDatabase, workspace_id: str, list_id: str, changes: dict) -> dict | None:
    return await lists.update(db, workspace_id, list_id, changes)


async def delete(db: AsyncDatabase, workspace_id: str, list_id: str) -> bool:
    return await lists.delete(db, workspace_id, list_id)


async def add_members(db: AsyncDatabase, static_list: dict, contact_ids: list[str]) -> memberships.Outcome:
    return await lists.add_members(db, static_list, contact_ids)


async def remove_members(db: AsyncDatabase, static_list: dict, contact_ids: list[str]) -> memberships.Outcome:
    return await lists.remove_members(db, static_list, contact_ids)
