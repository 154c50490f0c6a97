from __future__ import annotations

from typing import Any

from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

# Workers and ops commands: a job that finds the store away waits this long, then fails
# and is retried by its queue's policy.
DEFAULT_WAIT_SECONDS = 5.0
# Opening one connection (TCP, and TLS where used) may take this long, whatever the wait:
# a reachable store far away is still reachable.
CONNECT_TIMEOUT_SECONDS = 5.0


class _Database(AsyncDatabase):
    """A database whose collection objects are made once: PyMongo builds a new one on
    every `db.<name>` (4% of a single send's CPU in the front, which names several)."""

    def __getitem__(self, name: str) -> AsyncCollection:
        made = self.__dict__.setdefault("_made_collections", {})
        collection = made.get(name)
        if collection is None:
            collection = made[name] = super().__getitem__(name)
        return collection


def connect(url: str, database: str, *, wait_seconds: float = DEFAULT_WAIT_SECONDS,
            answer_within_seconds: float | None = None) -> tuple[AsyncMongoClient, AsyncDatabase]:
    """One client per process and event loop; the caller owns closing it.

    `wait_seconds` (serverSelectionTimeoutMS) bounds how long an operation waits for a
    reachable store: an unreachable one fails it after that (ConnectionFailure).
    `answer_within_seconds` (socketTimeoutMS) bounds waiting for a reply from a store that
    accepted the connection but stopped answering; None waits as long as it takes."""
    options: dict[str, Any] = {"serverSelectionTimeoutMS": int(wait_seconds * 1000),
               "connectTimeoutMS": int(CONNECT_TIMEOUT_SECONDS * 1000)}
    if answer_within_seconds is not None:
        options["socketTimeoutMS"] = int(answer_within_seconds * 1000)
    client: AsyncMongoClient = AsyncMongoClient(url, tz_aware=True, **options)
    return client, _Database(client, database)


async def ping(db: AsyncDatabase) -> bool:
    try:
        await db.command("ping")
        return True
    except Exception:  # any failure means "not reachable" to a health check
        return False
