"""Daily counts per workspace and destination domain (pipelines/messages/deliverability.py):
`_id` = "<workspace id>:<YYYY-MM-DD>:<domain>", flat integer counters bumped with `$inc`
on upsert by `_id` (one bulk write a send job), and `day_ms` (the day's start, epoch ms),
the integer the console's read ranges over: an aggregate on `(workspace_id, day_ms)`."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import ms_of
from pipelines.messages.deliverability import COUNTERS

INDEXES: dict[str, list] = {
    "domain_daily": [IndexModel([("workspace_id", ASCENDING), ("day_ms", DESCENDING)], name="ws_day_ms")],
}
# A page reads at most this many daily rows (days × domains): the busiest month of a
# workspace sending to a long tail of domains is cut here, and the page says so.
MAX_ROWS = 5_000


def _bump_op(workspace_id: str, day: str, domain: str, fields: dict[str, int]) -> UpdateOne:
    return UpdateOne({"_id": f"{workspace_id}:{day}:{domain}"},
                     {"$inc": {k: int(v) for k, v in fields.items() if k in COUNTERS and v},
                      "$setOnInsert": {"workspace_id": workspace_id, "day": day, "domain": domain,
                                       "day_ms": ms_of(f"{day}T00:00:00Z")}},
                     upsert=True)


async def bump_many(db: AsyncDatabase, counts: dict) -> None:
    """{(workspace id, YYYY-MM-DD, domain): {counter: n}} added, one upsert each."""
    ops = [_bump_op(ws, day, domain, fields) for (ws, day, domain), fields in counts.items()
           if any(fields.get(k) for k in COUNTERS)]
    if ops:
        await db.domain_daily.bulk_write(ops, ordered=False)


async def since(db: AsyncDatabase, workspace_id: str, day_ms: int) -> list[dict]:
    """The workspace's daily rows from `day_ms` on (at most MAX_ROWS, the latest days first)."""
    pipeline: list[dict] = [{"$match": {"workspace_id": workspace_id, "day_ms": {"$gte": day_ms}}},
                            {"$sort": {"day_ms": -1}}, {"$limit": MAX_ROWS}]
    return await (await db.domain_daily.aggregate(pipeline)).to_list()
