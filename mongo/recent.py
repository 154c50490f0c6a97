"""Answers the request path asks for on every call (an API key, its workspace, a
workspace's sending domains) kept in this process for a couple of seconds, so a burst of
requests does not put the same question to the store each time.

A change written through this process is seen at once (the writer forgets the entries);
one written elsewhere (another front, the CLI, a direct store write) within
FRESH_SECONDS: revoking a key, changing a workspace's limits or a domain's verification
takes effect in every front within that bound (docs/api-conventions.md, "Auth")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

FRESH_SECONDS = 2.0
# More distinct entries than this in the bound is not a burst of one tenant: start over.
MAX_ENTRIES = 10_000


class Recent:
    """Values by key, per store and database, each for `seconds` after it was read."""

    def __init__(self, seconds: float = FRESH_SECONDS):
        self.seconds = seconds
        self._entries: dict[tuple, tuple[float, Any]] = {}
        # one store read per entry however many requests miss it at once
        self._loading: dict[tuple, asyncio.Future] = {}
        # bumped by every forget: a read begun before it must not keep what it found
        self._generation = 0

    @staticmethod
    def _slot(db: AsyncDatabase, key) -> tuple:
        return id(db.client), db.name, key

    def get(self, db: AsyncDatabase, key) -> Any | None:
        entry = self._entries.get(self._slot(db, key))
        if entry is None or entry[0] <= time.monotonic():
            return None
        return entry[1]

    def put(self, db: AsyncDatabase, key, value: Any) -> Any:
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[self._slot(db, key)] = (time.monotonic() + self.seconds, value)
        return value

    async def read(self, db: AsyncDatabase, key, load: Callable[[], Awaitable[Any]]) -> Any:
        """The kept value, else `load()`'s (kept unless None); concurrent misses share one load."""
        value = self.get(db, key)
        if value is not None:
            return value
        slot = self._slot(db, key)
        loading = self._loading.get(slot)
        if loading is None:
            loading = self._loading[slot] = asyncio.ensure_future(self._load(db, key, slot, load))
        return await asyncio.shield(loading)

    async def _load(self, db: AsyncDatabase, key, slot: tuple, load: Callable[[], Awaitable[Any]]) -> Any:
        generation, me = self._generation, asyncio.current_task()
        try:
            value = await load()
        finally:
            if self._loading.get(slot) is me:
                del self._loading[slot]
        if value is not None and generation == self._generation:
            self.put(db, key, value)
        return value

    def forget(self, db: AsyncDatabase, key) -> None:
        """After a write: the next read asks the store (not a read begun before it)."""
        self._generation += 1
        self._entries.pop(self._slot(db, key), None)
        self._loading.pop(self._slot(db, key), None)

    def clear(self) -> None:
        self._generation += 1
        self._entries.clear()
        self._loading.clear()
