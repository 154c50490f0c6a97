"""The store behind pipelines/messages/throttle.py: shared counts every worker process sees.

- Windows (per-key email rate, per-domain rate): buckets of W/6 seconds in the
  `rate_windows` collection the front's request limits use (`_id` = "send:<key>:<bucket>",
  purged by the scheduler through `expires_ms`). A take is `$inc` then read, then the
  excess given back, so concurrent takers can under-grant, never over-grant.
- Slots (per-domain concurrency): one lease document per taker in `send_slots`
  (`_id` = "<key>:<token>", `n`, `until`). A dead worker's lease lapses at `until`.
- Plan usage: one counter per workspace per month in `plan_usage` (`_id` = "<ws>:<YYYY-MM>").
- Per destination domain overrides: `domain_limits` (`_id` = domain,
  `rate_per_minute`, `concurrency`), set by operators (e.g. a warm-up for one provider).
"""

from __future__ import annotations

import math
import time

from pymongo import ASCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import ms_in, now_iso, now_ms
from pipelines.core.ids import new_uuid
from pipelines.messages.throttle import DomainLimit, Grant, Lease, SendLimits, plan_counter_id, recipient_domains

from . import counters, grouped_reads, rate_windows

BUCKETS_PER_WINDOW = 6

INDEXES: dict[str, list] = {
    "send_slots": [IndexModel([("key", ASCENDING), ("until_ms", ASCENDING)], name="key_until_ms"),
                   IndexModel([("until_ms", ASCENDING)], name="until_ms")],
}


class StoreLimiterBackend:
    """`pipelines.messages.throttle.LimiterBackend` over the store."""

    def __init__(self, db: AsyncDatabase):
        self.db = db

    @staticmethod
    def _buckets(key: str, window_seconds: int, now: float) -> tuple[list[str], float, int]:
        width = window_seconds / BUCKETS_PER_WINDOW
        current = int(now // width)
        first = current - BUCKETS_PER_WINDOW + 1
        return [f"send:{key}:{b}" for b in range(first, current + 1)], width, first

    async def take_window(self, key: str, want: int, limit: int, window_seconds: int) -> Grant:
        now = time.time()
        ids, width, first = self._buckets(key, window_seconds, now)
        coll = self.db.rate_windows
        # Our own atomic view of the current bucket, plus the older ones (which only shrink).
        current = await counters.add(self.db, "rate_windows", ids[-1], want,
                                     {"expires_ms": ms_in(window_seconds * 2)})
        counts = await rate_windows.older_counts(self.db, ids, now, width, "n")
        counts[ids[-1]] = current
        used = sum(counts.values())
        excess = min(want, max(0, used - limit))
        if not excess:
            return Grant(want)
        await coll.update_one({"_id": ids[-1]}, {"$inc": {"n": -excess}})
        # The first refused unit fits once the oldest counted bucket leaves the window.
        oldest = next((i for i, b in enumerate(ids) if counts.get(b, 0) > 0), len(ids) - 1)
        leaves_at = (first + oldest) * width + window_seconds
        return Grant(want - excess, max(1.0, math.ceil(leaves_at - now)))

    async def give_window(self, key: str, count: int, window_seconds: int) -> None:
        ids, _, _ = self._buckets(key, window_seconds, time.time())
        await self.db.rate_windows.update_one({"_id": ids[-1]}, {"$inc": {"n": -count}})

    async def take_slots(self, key: str, want: int, limit: int, lease_seconds: int) -> Lease:
        token = new_uuid()
        _id = f"{key}:{token}"
        coll = self.db.send_slots
        await coll.insert_one({"_id": _id, "key": key, "n": want, "until_ms": ms_in(lease_seconds)})
        held = await coll.find({"key": key, "until_ms": {"$gt": now_ms()}}, {"n": 1}).to_list()
        excess = min(want, max(0, sum(d.get("n", 0) for d in held) - limit))
        if excess == want:
            await coll.delete_one({"_id": _id})
        elif excess:
            await coll.update_one({"_id": _id}, {"$inc": {"n": -excess}})
        return Lease(key, token, want - excess)

    async def give_slots(self, lease: Lease, count: int | None = None) -> None:
        _id = f"{lease.key}:{lease.token}"
        if count is None or count >= lease.count:
            await self.db.send_slots.delete_one({"_id": _id})
        elif count > 0:
            await self.db.send_slots.update_one({"_id": _id}, {"$inc": {"n": -count}})


async def load_limits(db: AsyncDatabase, messages: list[dict], *, default_key_rate_per_minute: int,
                      default_domain: DomainLimit) -> SendLimits:
    """The limits that apply to these messages: each key's `email_rate_limit` (or the
    default) and each destination domain's override (or the default)."""
    key_ids = sorted({m["key_id"] for m in messages if m.get("key_id")})
    # both read with the same reads of concurrent jobs (mongo/grouped_reads)
    keys = await grouped_reads.find_in(db, "api_keys", "_id", key_ids, projection={"email_rate_limit": 1})
    rates = {k["_id"]: int(k.get("email_rate_limit") or default_key_rate_per_minute) for k in keys}
    domains = sorted({d for m in messages for d in recipient_domains(m)})
    overrides = await grouped_reads.find_in(db, "domain_limits", "_id", domains)
    return SendLimits(
        key_rate_per_minute=rates, default_domain=default_domain,
        domains={o["_id"]: DomainLimit(int(o.get("rate_per_minute", default_domain.rate_per_minute)),
                                       int(o.get("concurrency", default_domain.concurrency)))
                 for o in overrides})


async def set_domain_limit(db: AsyncDatabase, domain: str, *, rate_per_minute: int, concurrency: int) -> None:
    await db.domain_limits.update_one(
        {"_id": domain.lower()},
        {"$set": {"rate_per_minute": rate_per_minute, "concurrency": concurrency, "updated_at": now_iso()}},
        upsert=True)


async def charge_plan(db: AsyncDatabase, workspace_id: str, month: str, count: int, limit: int) -> bool:
    """Count `count` emails against the month; refused (and not counted) past `limit`."""
    if count <= 0:
        return True
    _id = plan_counter_id(workspace_id, month)
    used = await counters.add(db, "plan_usage", _id, count, {"workspace_id": workspace_id, "month": month})
    if limit > 0 and used > limit:
        await db.plan_usage.update_one({"_id": _id}, {"$inc": {"n": -count}})
        return False
    return True


async def refund_plan(db: AsyncDatabase, workspace_id: str, month: str, count: int) -> None:
    """Give back a charge whose emails will not be sent after all."""
    if count > 0:
        await db.plan_usage.update_one({"_id": plan_counter_id(workspace_id, month)}, {"$inc": {"n": -count}})


async def plan_used(db: AsyncDatabase, workspace_id: str, month: str) -> int:
    doc = await db.plan_usage.find_one({"_id": plan_counter_id(workspace_id, month)})
    return int(doc["n"]) if doc else 0


async def purge_lapsed_slots(db: AsyncDatabase) -> int:
    """Forget concurrency leases whose worker never gave them back (a scheduler job, ops/store_jobs.py)."""
    return (await db.send_slots.delete_many({"until_ms": {"$lt": now_ms()}})).deleted_count



async def list_domain_limits(db: AsyncDatabase) -> list[dict]:
    return await db.domain_limits.find({}, sort=[("_id", 1)]).to_list()
