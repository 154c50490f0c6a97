"""Process heartbeats: each long-running process (scheduler, worker, front, inbound) writes
one small document, `_id` = its name, every pass or so. An operator's `postroom status`
reads them ("what was seen recently"), and a test can wait for "two more scheduler passes"
instead of sleeping for a guessed time."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError

from pipelines.core.clock import now_iso

log = logging.getLogger("postroom.processes")


def process_name(kind: str) -> str:
    return f"{kind}:{socket.gethostname()}:{os.getpid()}"


async def beat(db: AsyncDatabase, kind: str, name: str | None = None, **details) -> None:
    """One more pass of `kind` (counted in `passes`), seen now."""
    await db.processes.update_one(
        {"_id": name or process_name(kind)},
        {"$set": {"kind": kind, "seen_at": now_iso(), **details}, "$inc": {"passes": 1}},
        upsert=True)


async def passes(db: AsyncDatabase, kind: str) -> int:
    """How many passes every process of `kind` has made together (a monotonic counter)."""
    docs = await db.processes.find({"kind": kind}, {"passes": 1}).to_list()
    return sum(d.get("passes", 0) for d in docs)




# How often a long-running process (front, worker, inbound) says it is alive.
HEARTBEAT_SECONDS = 10.0


async def beat_until(db: AsyncDatabase, kind: str, stop: asyncio.Event, interval: float = HEARTBEAT_SECONDS,
                     snapshot: Callable[[], dict] | None = None, **details) -> None:
    """Beat now and every `interval` seconds until `stop` is set, with `details` and what
    `snapshot()` says at each beat. A failed beat is logged and tried again next time: a
    store hiccup must not take the process down."""
    while not stop.is_set():
        try:
            await beat(db, kind, **details, **(snapshot() if snapshot else {}))
        except PyMongoError as error:
            log.warning("heartbeat of %s failed: %s", kind, error)
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval)
        except TimeoutError:
            pass


async def forget(db: AsyncDatabase, kind: str, *fields: str) -> None:
    """Drop `fields` from this process's heartbeat (what stops being true when it stops);
    a store that does not answer is logged, not raised: the process is stopping anyway."""
    try:
        await db.processes.update_one({"_id": process_name(kind)}, {"$unset": dict.fromkeys(fields, "")})
    except PyMongoError as error:
        log.warning("clearing the heartbeat of %s failed: %s", kind, error)


async def recent(db: AsyncDatabase, since_iso: str) -> list[dict]:
    """Every process seen since `since_iso`, newest first."""
    docs = await db.processes.find({}).to_list()
    return sorted((d for d in docs if d.get("seen_at", "") >= since_iso), key=lambda d: d["seen_at"], reverse=True)
