"""Operator accounts (the console's operator view, across workspaces): `_id` is the
operator's name, lower-cased, so signing in is a primary-key lookup and a name is taken
once. Only a password hash is stored (pipelines/core/passwords.py)."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from pipelines.core.clock import now_iso

INDEXES: dict[str, list] = {}  # every read goes by `_id`


def operator_id(name: str) -> str:
    return name.strip().lower()


async def create(db: AsyncDatabase, name: str, password_hash: str) -> dict | None:
    """The new operator; None when the name is taken."""
    doc = {"_id": operator_id(name), "name": name.strip(), "password_hash": password_hash, "created_at": now_iso()}
    try:
        await db.operators.insert_one(doc)
    except DuplicateKeyError:
        return None
    return doc


async def get(db: AsyncDatabase, name_or_id: str) -> dict | None:
    return await db.operators.find_one({"_id": operator_id(name_or_id)})
