"""Counters many requests add to at once (a key's rate-window bucket, a workspace's month
of plan usage): one `$inc` in flight per counter and process, carrying the sum of every
add that arrived meanwhile. Each add is answered the counter's value right after its own
cost, as if the adds had gone to the store one by one in arrival order, so the limits
built on them decide exactly as before, with one store round trip per group of concurrent
requests instead of one each."""

from __future__ import annotations

import asyncio

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

# (client, database, collection, _id) → the adds waiting for the `$inc` in flight
_waiting: dict[tuple, list[tuple[int, asyncio.Future]]] = {}
_in_flight: set[tuple] = set()


async def add(db: AsyncDatabase, collection: str, _id: str, cost: int, set_on_insert: dict) -> int:
    """`$inc` counter `_id` (field `n`, created with `set_on_insert`) by `cost`; its value
    right after this cost."""
    slot = (id(db.client), db.name, collection, _id)
    if slot in _in_flight:
        done = asyncio.get_running_loop().create_future()
        _waiting.setdefault(slot, []).append((cost, done))
        return await done
    _in_flight.add(slot)  # nothing in flight: this add goes alone, without a task
    try:
        return await _inc(db[collection], _id, cost, set_on_insert)
    finally:
        if slot in _waiting:
            asyncio.ensure_future(_flush(db[collection], _id, slot, set_on_insert))
        else:
            _in_flight.discard(slot)


async def _inc(coll, _id: str, cost: int, set_on_insert: dict) -> int:
    doc = await coll.find_one_and_update({"_id": _id}, {"$inc": {"n": cost}, "$setOnInsert": set_on_insert},
                                         upsert=True, return_document=ReturnDocument.AFTER)
    return doc["n"]


async def _flush(coll, _id: str, slot: tuple, set_on_insert: dict) -> None:
    try:
        while batch := _waiting.pop(slot, None):
            total = sum(cost for cost, _ in batch)
            try:
                value = await _inc(coll, _id, total, set_on_insert) - total
            except Exception as error:  # each waiting request answers its own failure
                for _, done in batch:
                    if not done.done():
                        done.set_exception(error)
                continue
            for cost, done in batch:
                value += cost
                if not done.done():
                    done.set_result(value)
    finally:
        _in_flight.discard(slot)
