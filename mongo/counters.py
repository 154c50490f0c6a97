"""Counters many requests add to at once (a key's rate-window bucket, a workspace's month
of plan usage): one `$inc` in flight per counter and process, carrying the sum of every
add that arrived meanwhile. Each add is answered the counter's value right after its own
cost, as if the adds had gone to the store one by one in arrival order, so the limits
built on them decide exactly as before, with one store round trip per group of concurrent
requests instead of one each."""

from __future__ import annotations

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.group_commit import grouped


async def add(db: AsyncDatabase, collection: str, _id: str, cost: int, set_on_insert: dict) -> int:
    """`$inc` counter `_id` (field `n`, created with `set_on_insert`) by `cost`; its value
    right after this cost."""
    async def run(costs: list[int]) -> list[int]:
        total = sum(costs)
        doc = await db[collection].find_one_and_update(
            {"_id": _id}, {"$inc": {"n": total}, "$setOnInsert": set_on_insert}, upsert=True,
            return_document=ReturnDocument.AFTER)
        value, answers = doc["n"] - total, []
        for cost in costs:  # in arrival order, as if each had gone alone
            value += cost
            answers.append(value)
        return answers
    return await grouped(("counter", id(db.client), db.name, collection, _id), run, cost)
