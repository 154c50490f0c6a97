"""Storing the messages a send request creates, when the answer to a write can be lost.

Under an Idempotency-Key every attempt of a request builds the same message ids
(front/idempotency.request_seed), so an id already present is that request's earlier
attempt, stored: not an error. Without a key ids are random and never collide."""

from __future__ import annotations

import functools

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from pipelines.core.group_commit import grouped

from . import message_search, messages

DUPLICATE_KEY = 11000


async def insert_new(db: AsyncDatabase, docs: list[dict]) -> None:
    """Insert every message not stored yet (unordered: one refused document does not stop
    the others); raises on anything but ids already present. Inserts made while another
    is in flight go to the store together (pipelines.core.group_commit), each caller answered
    for its own documents alone."""
    if docs:
        await grouped(("insert_messages", id(db.client), db.name), functools.partial(_insert_groups, db), docs)


# Documents a single insert command carries. The embedded store runs one command at a time
# (~0.4 ms a message document), so a 1,000-message batch sent as one command kept every
# worker's reads and outcome writes waiting for half a second; in commands of this size the
# others get in between. On MongoDB it costs a few round trips per batch request.
INSERT_CHUNK = 100


async def _insert_groups(db: AsyncDatabase, groups: list[list[dict]]) -> list[BulkWriteError | None]:
    flat = [messages.watched(d) for docs in groups for d in docs]
    await message_search.insert_keys(db, flat)  # first: a key without its message is skipped
    errors: list[dict] = []
    for first in range(0, len(flat), INSERT_CHUNK):
        try:
            await db.messages.insert_many(flat[first:first + INSERT_CHUNK], ordered=False)
        except BulkWriteError as error:
            if error.details.get("writeConcernErrors"):
                raise
            errors += [{**e, "index": e["index"] + first} for e in error.details.get("writeErrors", [])]
    if not errors:
        return [None] * len(groups)
    return own_write_errors(errors, [len(docs) for docs in groups])


def own_write_errors(errors: list[dict], sizes: list[int]) -> list[BulkWriteError | None]:
    """For each caller of a grouped insert (`sizes`: how many documents each gave, in
    order), the write errors of its own documents, indexed within them — None when all
    its documents are stored now (an id already present is stored)."""
    answers: list[BulkWriteError | None] = []
    first = 0
    for size in sizes:
        mine = [{**e, "index": e["index"] - first} for e in errors
                if first <= e["index"] < first + size and e.get("code") != DUPLICATE_KEY]
        answers.append(BulkWriteError({"writeErrors": mine, "writeConcernErrors": [], "nInserted": 0})
                       if mine else None)
        first += size
    return answers


async def stored_ids(db: AsyncDatabase, message_ids: list[str]) -> set[str]:
    found = await db.messages.find({"_id": {"$in": list(message_ids)}}, {"_id": 1}).to_list()
    return {doc["_id"] for doc in found}
