"""Draining a backlog in several batches per scheduler tick, so a burst does not wait a tick per batch."""

from __future__ import annotations

from collections.abc import Awaitable, Callable


async def drain(fetch: Callable[[int], Awaitable[list]], handle: Callable[[list], Awaitable[None]], *,
                batch: int, passes: int) -> int:
    """Up to `passes` rounds of `handle(await fetch(batch))`, stopping at the first short
    batch. Returns how many items were handled."""
    done = 0
    for _ in range(passes):
        items = await fetch(batch)
        if not items:
            break
        await handle(items)
        done += len(items)
        if len(items) < batch:
            break
    return done
