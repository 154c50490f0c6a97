"""Sliding-window counters shared by every front and worker process.

A window of W seconds is kept as buckets of W/6 seconds. The windows of one subject (an
API key's request and email windows; a form's per-client window) share one small
document per bucket (`_id` = subject:bucket), a field per window (its scope: `req`,
`email`, `form`), so counting in several windows at once is one upsert by `_id`, and the
older buckets are one `_id $in` read per bucket and process for all of them (see
`older_docs`) — fast on MongoDB and on the embedded store. Expired buckets are purged
by the scheduler (`expires_ms`, epoch ms)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import ms_in, now_ms

from . import counters

BUCKETS_PER_WINDOW = 6
# Older buckets' counts are kept once read this far into the current bucket: by then no
# count made under the previous bucket is still on its way to the store.
SETTLED_SECONDS = 1.0
MAX_KEPT = 10_000
# (client, database, subject) → (the current bucket's id, the older buckets' documents)
_OLDER: dict[tuple, tuple[str, dict[str, dict]]] = {}


@dataclass(frozen=True)
class Charge:
    """A cost to count in one of a subject's windows."""
    scope: str
    limit: int
    cost: int = 1


@dataclass(frozen=True)
class WindowState:
    allowed: bool
    limit: int
    used: int
    reset_epoch: float  # when the oldest counted bucket leaves the window
    # refused: when enough has left the window for the refused cost to fit
    room_epoch: float | None = None
    bucket: str | None = None  # counted: the bucket the cost was counted in (for give_back)
    scope: str | None = None

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def retry_after_seconds(self, now: float) -> int:
        return max(1, math.ceil((self.room_epoch or self.reset_epoch) - now))


async def hit(db: AsyncDatabase, scope: str, subject: str, *, limit: int,
              window_seconds: int = 60, cost: int = 1, now: float | None = None) -> WindowState:
    """Count `cost` against the window; if that would pass `limit`, take it back and
    answer not allowed. A refused request does not use up the window."""
    states = await hit_together(db, subject, [Charge(scope, limit, cost)], window_seconds=window_seconds, now=now)
    return states[scope]


async def hit_together(db: AsyncDatabase, subject: str, charges: list[Charge], *, window_seconds: int = 60,
                       now: float | None = None) -> dict[str, WindowState]:
    """Count each charge in its window of `subject`, all in one store write, and decide
    as if they had been counted one after the other, stopping at the first refusal: the
    charges before it stay counted, it and those after it are taken back (one more
    write). By scope: a state for each charge up to the first refused one; none for the
    charges after it (never considered, as if never asked)."""
    now = time.time() if now is None else now
    width = window_seconds / BUCKETS_PER_WINDOW
    current = int(now // width)
    ids = [f"{subject}:{b}" for b in range(current - BUCKETS_PER_WINDOW + 1, current + 1)]
    # The count this request itself made (not a later read, which would include concurrent
    # requests and refuse them all): of k simultaneous requests exactly the allowed ones pass.
    mine = await counters.add_fields(db, "rate_windows", ids[-1], {c.scope: c.cost for c in charges},
                                     {"expires_ms": ms_in(window_seconds * 2)})
    older = await older_docs(db, ids, now, width)
    states: dict[str, WindowState] = {}
    for n, charge in enumerate(charges):
        counts = {i: older.get(i, {}).get(charge.scope, 0) for i in ids[:-1]}
        counts[ids[-1]] = mine[charge.scope]
        used = sum(counts.values())
        oldest = next((i for i, b in enumerate(ids) if counts.get(b, 0) > 0), len(ids) - 1)
        reset = (current - BUCKETS_PER_WINDOW + 1 + oldest) * width + window_seconds
        if used <= charge.limit:
            states[charge.scope] = WindowState(True, charge.limit, used, reset, bucket=ids[-1], scope=charge.scope)
            continue
        await db.rate_windows.update_one({"_id": ids[-1]}, {"$inc": {c.scope: -c.cost for c in charges[n:]}})
        counts[ids[-1]] -= charge.cost
        states[charge.scope] = WindowState(
            False, charge.limit, used - charge.cost, reset, scope=charge.scope,
            room_epoch=_room_at(ids, counts, charge.cost, charge.limit, current, width, window_seconds))
        break
    return states


async def older_counts(db: AsyncDatabase, ids: list[str], now: float, width: float, field: str) -> dict[str, int]:
    """The counts in `field` of the buckets before the current one (`ids[-1]`), by `_id`
    (`older_docs`)."""
    return {_id: doc.get(field, 0) for _id, doc in (await older_docs(db, ids, now, width)).items()}


async def older_docs(db: AsyncDatabase, ids: list[str], now: float, width: float) -> dict[str, dict]:
    """The documents of a subject's buckets before the current one (`ids[-1]`), by `_id`.
    Counts land only in the current bucket, and what is given back only lowers one, so
    once settled they are kept by this process until the current bucket changes: a kept
    count can only be higher than the store's (refusing early), never lower (admitting
    past the limit)."""
    slot = (id(db.client), db.name, ids[-1].rpartition(":")[0])
    kept = _OLDER.get(slot)
    if kept is not None and kept[0] == ids[-1]:
        return kept[1]
    docs = await db.rate_windows.find({"_id": {"$in": ids[:-1]}}).to_list()
    counts = {d["_id"]: d for d in docs}
    if now - (now // width) * width >= SETTLED_SECONDS:
        if len(_OLDER) >= MAX_KEPT:
            _OLDER.clear()
        _OLDER[slot] = (ids[-1], counts)
    return counts


async def give_back(db: AsyncDatabase, state: WindowState, cost: int) -> None:
    """Take back a counted cost whose work did not happen after all."""
    if state.allowed and state.bucket and state.scope and cost > 0:
        await db.rate_windows.update_one({"_id": state.bucket}, {"$inc": {state.scope: -cost}})
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
    ids = [f"{subject}:{b}" for b in range(current - BUCKETS_PER_WINDOW + 1, current + 1)]
    docs = await db.rate_windows.find({"_id": {"$in": ids}}).to_list()
    used = sum(d.get(scope, 0) for d in docs)
    return WindowState(used < limit, limit, used, (current + 1) * width + window_seconds - width, scope=scope)


async def purge_expired(db: AsyncDatabase) -> int:
    result = await db.rate_windows.delete_many({"expires_ms": {"$lt": now_ms()}})
    return result.deleted_count
