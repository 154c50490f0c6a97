"""What every workspace-owned collection does alike: read one by id, a page by name, a guarded
update and delete (always scoped by `workspace_id`), and inserts where a unique index says
"already there"."""

from __future__ import annotations

import re
from typing import Any

from pymongo import ASCENDING, DESCENDING, InsertOne, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from pipelines.core.clock import now_iso
from pipelines.core.ids import new_uuid

DUPLICATE_KEY = 11000
NEWEST_FIRST = [("created_at", DESCENDING), ("_id", ASCENDING)]


async def create(collection: AsyncCollection, workspace_id: str, fields: dict,
                 stamped: tuple[str, ...] = ()) -> Any:
    """A new document of the workspace with `fields`, a fresh id, and `created_at`, `updated_at`
    and each of `stamped` set to now. Like the driver's reads below, typed `Any`: the caller
    names the collection's document type (pipelines/core/documents.py)."""
    now = now_iso()
    doc = {"_id": new_uuid(), "workspace_id": workspace_id, **fields,
           **{k: now for k in ("created_at", "updated_at", *stamped)}}
    await collection.insert_one(doc)
    return doc


async def insert_new(collection: AsyncCollection, doc: dict) -> bool:
    """False when a unique index already holds this document."""
    try:
        await collection.insert_one(doc)
    except DuplicateKeyError:
        return False
    return True


async def insert_all_new(collection: AsyncCollection, docs: list[dict]) -> None:
    """Insert each document a unique index does not hold yet; the others are left as they are."""
    if not docs:
        return
    try:
        await collection.bulk_write([InsertOne(d) for d in docs], ordered=False)
    except BulkWriteError as error:
        if any(e.get("code") != DUPLICATE_KEY for e in error.details.get("writeErrors", [])):
            raise


async def get_owned(collection: AsyncCollection, workspace_id: str, doc_id: str, **where) -> Any:
    return await collection.find_one({"_id": doc_id, "workspace_id": workspace_id, **where})


def name_search(query: dict, search: str | None) -> dict:
    """`query`, narrowed to names holding `search` (case-insensitive, taken literally)."""
    if search:
        query["name"] = {"$regex": re.escape(search), "$options": "i"}
    return query


async def page(collection: AsyncCollection, query: dict, *, limit: int, offset: int,
               sort: list[tuple[str, int]], projection: dict | None = None) -> tuple[list[dict], int]:
    """One page of the documents matching `query`, and how many match in all."""
    items = await collection.find(query, projection, sort=sort, skip=offset, limit=limit).to_list()
    return items, await collection.count_documents(query)


async def update_owned(collection: AsyncCollection, workspace_id: str, doc_id: str, changes: dict) -> Any:
    """The document after `changes` (and a new `updated_at`), None when it is not there."""
    return await collection.find_one_and_update(
        {"_id": doc_id, "workspace_id": workspace_id},
        {"$set": {**changes, "updated_at": now_iso()}}, return_document=ReturnDocument.AFTER)


async def delete_owned(collection: AsyncCollection, workspace_id: str, doc_id: str) -> bool:
    result = await collection.delete_one({"_id": doc_id, "workspace_id": workspace_id})
    return result.deleted_count == 1



async def _newest(collection: AsyncCollection, match: dict, limit: int, field: str,
                  projection: dict | None) -> list[Any]:
    pipeline: list[dict] = [{"$match": match}, {"$sort": {field: -1, "_id": -1}}, {"$limit": limit}]
    if projection:
        pipeline.append({"$project": projection})
    return await (await collection.aggregate(pipeline)).to_list()


async def newest_first(collection: AsyncCollection, where: dict, after: tuple[int, str] | None,
                       limit: int, *, field: str = "created_ms", projection: dict | None = None) -> list[Any]:
    """Up to `limit` documents of `where`, newest first by their integer `field` (default
    `created_ms`; then `_id`), after the cursor `after` (the last shown: its `field`, `_id`;
    None: from the newest). Aggregates whose equalities and one integer range, sorted by
    that integer, the embedded store answers from a compound index `(…equalities, field)`
    (docs/store-notes.md) — where a `find` on the same reads every document. As GET /email
    pages: the ties on the cursor's millisecond first, then the older ones; never an `$or`."""
    if after is None:
        return await _newest(collection, {**where, field: {"$gte": 0}}, limit, field, projection)
    ties = await _newest(collection, {**where, field: after[0], "_id": {"$lt": after[1]}}, limit, field, projection)
    if len(ties) >= limit:
        return ties[:limit]
    return ties + await _newest(collection, {**where, field: {"$gte": 0, "$lt": after[0]}}, limit - len(ties),
                                field, projection)


def cursor_of(doc: dict) -> str:
    """A console page's cursor: the last shown document's `created_ms` and `_id`."""
    return f"{int(doc['created_ms'])}:{doc['_id']}"


def cursor_position(cursor: str | None) -> tuple[int, str] | None:
    """`cursor_of`'s cursor read back; None for none, or for one that is not ours."""
    created_ms, _, doc_id = (cursor or "").partition(":")
    return (int(created_ms), doc_id) if created_ms.isdigit() and doc_id else None
