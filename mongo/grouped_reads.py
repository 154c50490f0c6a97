"""Reads of documents by one field's values (`field: {$in: [...]}`), shared by concurrent
callers: a lookup asked while an identical one (same collection, field, other filters and
projection) is in flight waits and goes to the store with every other such lookup, as one
find over all their values (pipelines.core.group_commit). Each caller gets the documents whose
`field` is among its own values, read after it asked — never a copy older than its
question, so nothing here is a cache.

Worth it where many small jobs or requests on one event loop ask the same kind of
question at once: a front's burst of single sends (their suppressions), a worker's
concurrent render jobs of one or two messages each (suppressions, contacts, the keys'
and domains' limits, template versions) — one store round trip and one command's fixed
cost per group instead of per job."""

from __future__ import annotations

import functools
import json
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.group_commit import grouped


async def find_in(db: AsyncDatabase, collection: str, field: str, values, *, where: dict | None = None,
                  projection: dict | None = None) -> list[Any]:
    """The documents of `collection` matching `where` whose `field` (a scalar: `_id`, a
    key) is one of `values`; `projection` must keep `field`. Typed `Any`, as the driver's
    reads: the caller names the collection's document type (pipelines/core/documents.py)."""
    values = list(dict.fromkeys(values))
    if not values:
        return []
    where, projection = where or {}, projection or None
    key = ("find_in", id(db.client), db.name, collection, field,
           json.dumps(where, sort_keys=True, default=str), json.dumps(projection, sort_keys=True))
    return await grouped(key, functools.partial(_find_for_groups, db, collection, field, where, projection), values)


async def _find_for_groups(db: AsyncDatabase, collection: str, field: str, where: dict, projection: dict | None,
                           groups: list[list]) -> list[list[dict]]:
    everything = list(dict.fromkeys(v for values in groups for v in values))
    docs = await db[collection].find({**where, field: {"$in": everything}}, projection).to_list()
    if len(groups) == 1:
        return [docs]
    by_value: dict = {}
    for doc in docs:
        by_value.setdefault(doc.get(field), []).append(doc)
    return [[doc for value in values for doc in by_value.get(value, [])] for values in groups]
