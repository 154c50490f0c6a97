"""Counters many requests add to at once (a key's rate-window bucket, a workspace's month
of plan usage): one `$inc` in flight per counter document and process, carrying the sum
of every add that arrived meanwhile. Each add is answered the counter's value right after
its own cost, as if the adds had gone to the store one by one in arrival order, so the
limits built on them decide exactly as before, with one store round trip per group of
concurrent requests instead of one each. A document may hold several counters (fields):
an add names the ones it counts in, and learns each one's value."""

from __future__ import annotations

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.group_commit import grouped


async def add(db: AsyncDatabase, collection: str, _id: str, cost: int, set_on_insert: dict) -> int:
    """`$inc` counter `_id` (field `n`, created with `set_on_insert`) by `cost`; its value
    right after this cost."""
    return (await add_fields(db, collection, _id, {"n": cost}, set_on_insert))["n"]


async def add_fields(db: AsyncDatabase, collection: str, _id: str, costs: dict[str, int],
                     set_on_insert: dict) -> dict[str, int]:
    """`$inc` each field of document `_id` (created with `set_on_insert`) by its cost in
    `costs`; each field's value right after this add."""
    async def run(adds: list[dict[str, int]]) -> list[dict[str, int]]:
        totals: dict[str, int] = {}
        for fields in adds:
            for field, cost in fields.items():
                totals[field] = totals.get(field, 0) + cost
        doc = await db[collection].find_one_and_update(
            {"_id": _id}, {"$inc": totals, "$setOnInsert": set_on_insert}, upsert=True,
            return_document=ReturnDocument.AFTER)
        assert doc is not None, "upserted"
        value = {field: doc.get(field, 0) - total for field, total in totals.items()}
        answers = []
        for fields in adds:  # in arrival order, as if each had gone alone
            mine = {}
            for field, cost in fields.items():
                value[field] += cost
                mine[field] = value[field]
            answers.append(mine)
        return answers
    return await grouped(("counter", id(db.client), db.name, collection, _id), run, dict(costs))
