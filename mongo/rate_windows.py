"""Sliding-window counters shared by every front and worker process.

A window of W seconds is kept as buckets of W/6 seconds, one small document each
(`_id` = scope:subject:bucket), so a check is one upsert by `_id` and, once per bucket
and process, one `_id $in` read of the older buckets (see `older_counts`) — fast on
MongoDB and on the embedded store. Expired buckets are purged by the scheduler
(`expires_at`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from pymongo.asynchronous.database import AsyncDatabase

from pipelines.clock import in_seconds, now_iso

from . import counters

BUCKETS_PER_WINDOW = 6
# Older buckets' counts are kept once read this far into the current bucket: by then no
# count made under the previous bucket is still on its way to the store.
SETTLED_SECONDS = 1.0
MAX_KEPT = 10_000
# (client, database, "scope:subject") → (the current bucket's id, the older buckets' counts)
_OLDER: dict[tuple, tuple[str, dict[str, int]]] = {}


@dataclass(frozen=True)
class WindowState:
    allowed: bool
    limit: int
    used: int
    reset_epoch: float  # when the oldest counted bucket leaves the window
    # refused: when enough has left the window for the refused cost to fit
    room_epoch: float | None = None
    bucket: str | None = None  # allowed: the bucket the cost was counted in (for give_back)

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def retry_after_seconds(self, now: float) -> int:
        return max(1, math.ceil((self.room_epoch or self.reset_epoch) - now))


async def hit(db: AsyncDatabase, scope: str, subject: str, *, limit: int,
              window_seconds: int = 60, cost: int = 1, now: float | None = None) -> WindowState:
    """Count `cost` against the window; if that would pass `limit`, take it back and
    answer not allowed. A refused request does not use up the window."""
    now = time.time() if now is None else now
    width = window_seconds / BUCKETS_PER_WINDOW
    current = int(now // width)
    ids = [f"{scope}:{subject}:{b}" for b in range(current - BUCKETS_PER_WINDOW + 1, current + 1)]
    coll = db.rate_windows
    # The count this request itself made (not a later read, which would include concurrent
    # requests and refuse them all): of k simultaneous requests exactly the allowed ones pass.
    mine = await counters.add(db, "rate_windows", ids[-1], cost, {"expires_at": in_seconds(window_seconds * 2)})
    counts = await older_counts(db, ids, now, width)
    counts[ids[-1]] = mine
    used = sum(counts.values())
    oldest = next((i for i, b in enumerate(ids) if counts.get(b, 0) > 0), len(ids) - 1)
    reset = (current - BUCKETS_PER_WINDOW + 1 + oldest) * width + window_seconds
    if used > limit:
        await coll.update_one({"_id": ids[-1]}, {"$inc": {"n": -cost}})
        counts[ids[-1]] -= cost
        return WindowState(False, limit, used - cost, reset,
                           room_epoch=_room_at(ids, counts, cost, limit, current, width, window_seconds))
    return WindowState(True, limit, used, reset, bucket=ids[-1])


async def older_counts(db: AsyncDatabase, ids: list[str], now: float, width: float) -> dict[str, int]:
    """The counts of a window's buckets before the current one (`ids[-1]`). Counts land
    only in the current bucket, and what is given back only lowers one, so once settled
    they are kept by this process until the current bucket changes: a kept count can only
    be higher than the store's (refusing early), never lower (admitting past the limit)."""
    slot = (id(db.client), db.name, ids[-1].rpartition(":")[0])
    kept = _OLDER.get(slot)
    if kept is not None and kept[0] == ids[-1]:
        return dict(kept[1])
    docs = await db.rate_windows.find({"_id": {"$in": ids[:-1]}}).to_list()
    counts = {d["_id"]: d.get("n", 0) for d in docs}
    if now - (now // width) * width >= SETTLED_SECONDS:
        if len(_OLDER) >= MAX_KEPT:
            _OLDER.clear()
        _OLDER[slot] = (ids[-1], dict(counts))
    return counts


async def give_back(db: AsyncDatabase, state: WindowState, cost: int) -> None:
    """Take back a counted cost whose work did not happen after all."""
    if state.allowed and state.bucket and cost > 0:
        await db.rate_windows.update_one({"_id": state.bucket}, {"$inc": {"n": -cost}})
        _OLDER.pop((id(db.client), db.name, state.bucket.rpartition(":")[0]), None)


def _room_at(ids: list[str], counts: dict[str, int], cost: int, limit: int, current: int,
             width: float, window_seconds: int) -> float:
    """When `cost` more fits: the buckets leave oldest first, each at its end plus a window."""
    left = sum(counts.values())
    for i, bucket in enumerate(ids):
        left -= counts.get(bucket, 0)
        if left + cost <= limit:
            return (current - BUCKETS_PER_WINDOW + 1 + i) * width + window_seconds
    return current * width + window_seconds + width  # cost > limit: never; a full window from now


async def peek(db: AsyncDatabase, scope: str, subject: str, *, limit: int,
               window_seconds: int = 60, now: float | None = None) -> WindowState:
    now = time.time() if now is None else now
    width = window_seconds / BUCKETS_PER_WINDOW
    current = int(now // width)
    ids = [f"{scope}:{subject}:{b}" for b in range(current - BUCKETS_PER_WINDOW + 1, current + 1)]
    docs = await db.rate_windows.find({"_id": {"$in": ids}}).to_list()
    used = sum(d.get("n", 0) for d in docs)
    return WindowState(used < limit, limit, used, (current + 1) * width + window_seconds - width)


async def purge_expired(db: AsyncDatabase) -> int:
    result = await db.rate_windows.delete_many({"expires_at": {"$lt": now_iso()}})
    return result.deleted_count

