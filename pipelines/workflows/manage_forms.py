"""A signup form's commands (POST, PATCH and DELETE /forms…); the route has checked the
fields against the workspace (static lists, unique field names, a sender for double opt-in).
Deleting a form leaves its pending signups to expire unconfirmed."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import forms


async def create(db: AsyncDatabase, workspace_id: str, fields: dict) -> dict:
    return await forms.create(db, workspace_id, fields)


async def update(db: AsyncDatabase, workspace_id: str, form_id: str, changes: dict) -> dict | None:
    return await forms.update(db, workspace_id, form_id, changes)


async def delete(db: AsyncDatabase, workspace_id: str, form_id: str) -> bool:
    return await forms.delete(db, workspace_id, form_id)
