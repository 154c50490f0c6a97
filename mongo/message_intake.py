"""Storing the messages a send request creates, when the answer to a write can be lost.

Under an Idempotency-Key every attempt of a request builds the same message ids
(front/idempotency.request_seed), so an id already present is that request's earlier
attempt, stored: not an error. Without a key ids are random and never collide."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from . import messages

DUPLICATE_KEY = 11000


async def insert_new(db: AsyncDatabase, docs: list[dict]) -> None:
    """Insert every message not stored yet (unordered: one refused document does not stop
    the others); raises on anything but ids already present."""
    if not docs:
        return
    try:
        await db.messages.insert_many([messages.watched(d) for d in docs], ordered=False)
    except BulkWriteError as error:
        codes = {e.get("code") for e in error.details.get("writeErrors", [])}
        if codes - {DUPLICATE_KEY} or error.details.get("writeConcernErrors"):
            raise


async def stored_ids(db: AsyncDatabase, message_ids: list[str]) -> set[str]:
    found = await db.messages.find({"_id": {"$in": list(message_ids)}}, {"_id": 1}).to_list()
    return {doc["_id"] for doc in found}
