"""Daily counters per workspace, kept as events happen, so GET /analytics never scans
messages.

One document per workspace per UTC day: `_id` = "<workspace id>:<YYYY-MM-DD>", flat
integer fields (`sends`, `api_sends`, `campaign_sends`, `delivered`, `opens`, `clicks`,
`bounces`, `complaints`) bumped with `$inc` on upsert. Flat fields on purpose: a dotted
`$inc` on upsert creates a literal dotted key in the embedded store. Reads go by `_id`
(the list of days of the period), which both stores serve from the primary key."""

from __future__ import annotations

import datetime as dt
import functools

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import utcnow
from pipelines.core.group_commit import grouped

INDEXES: dict[str, list] = {}  # every read and write goes by `_id`

COUNTERS = ("sends", "api_sends", "campaign_sends", "delivered", "opens", "clicks",
            "bounces", "complaints")


def today() -> str:
    return utcnow().strftime("%Y-%m-%d")




def _bump_op(workspace_id: str, day: str, fields: dict[str, int]) -> UpdateOne:
    unknown = set(fields) - set(COUNTERS)
    if unknown:
        raise ValueError(f"unknown analytics counter(s): {', '.join(sorted(unknown))}")
    return UpdateOne({"_id": f"{workspace_id}:{day}"},
                     {"$inc": {k: int(v) for k, v in fields.items()},
                      "$setOnInsert": {"workspace_id": workspace_id, "day": day}},
                     upsert=True)


async def bump(db: AsyncDatabase, workspace_id: str, day: str | None = None, **fields: int) -> None:
    """Add to one workspace's counters for `day` (YYYY-MM-DD, default today, UTC):
    `await bump(db, ws, sends=1, api_sends=1)`."""
    fields = {k: v for k, v in fields.items() if v}
    if fields:
        await db.analytics_daily.bulk_write([_bump_op(workspace_id, day or today(), fields)])


async def bump_many(db: AsyncDatabase, increments: dict[tuple[str, str], dict[str, int]]) -> None:
    """Many counters in one round trip: {(workspace_id, day): {"delivered": 3, ...}}. The
    bumps of concurrent callers (a worker's jobs finishing at once) are summed into one
    write (pipelines.core.group_commit); each caller returns once the write holding its own
    has landed."""
    wanted = {key: {k: v for k, v in fields.items() if v} for key, fields in increments.items()}
    wanted = {key: fields for key, fields in wanted.items() if fields}
    for (_ws, _day), fields in wanted.items():
        _bump_op(_ws, _day, fields)  # an unknown counter fails its own caller, not the group
    if wanted:
        await grouped(("analytics", id(db.client), db.name), functools.partial(_bump_groups, db), wanted)


async def _bump_groups(db: AsyncDatabase, groups: list[dict]) -> list[None]:
    total: dict[tuple[str, str], dict[str, int]] = {}
    for increments in groups:
        for key, fields in increments.items():
            summed = total.setdefault(key, {})
            for name, value in fields.items():
                summed[name] = summed.get(name, 0) + value
    await db.analytics_daily.bulk_write([_bump_op(ws, day, fields) for (ws, day), fields in total.items()],
                                        ordered=False)
    return [None] * len(groups)


def period_days(days: int, end: dt.date | None = None) -> list[str]:
    """The `days` UTC dates ending today, oldest first."""
    last = end or utcnow().date()
    return [(last - dt.timedelta(days=offset)).isoformat() for offset in range(days - 1, -1, -1)]


async def daily(db: AsyncDatabase, workspace_id: str, days: list[str]) -> dict[str, dict[str, int]]:
    """Counters per day for the given days; days without activity are absent."""
    ids = [f"{workspace_id}:{d}" for d in days]
    docs = await db.analytics_daily.find({"_id": {"$in": ids}}).to_list()
    return {d["day"]: {k: int(d.get(k) or 0) for k in COUNTERS}
            for d in docs if d.get("workspace_id") == workspace_id}
