"""Group commit: calls of one kind made while an earlier one is in flight wait and go
together, as one call, when it returns.

At low load every call goes out at once, alone, as it would without this. Under load —
a front answering many single sends at the same time — a store write or read, or a
broker publish, carries the work of every request that arrived meanwhile: one round trip
and one command's fixed cost (large on the embedded store) per group instead of per
request. The group's `run` answers each caller on its own (a value, or the exception
that caller alone should see), so a caller never learns another's outcome.

Groups are per event loop (their futures belong to one) and per key (e.g. one counter,
one workspace's suppression list); a group is forgotten once idle, so keys that come and
go (a rate window's bucket) do not pile up."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

# run(items) → one answer per item, in order: a value, or an exception to raise for it.
Run = Callable[[list], Awaitable[Sequence[Any]]]

_groups: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Group:
    def __init__(self, key: Hashable, run: Run, loop: asyncio.AbstractEventLoop):
        self.key, self.run, self.loop = key, run, loop
        self.pending: list[tuple[Any, asyncio.Future]] = []
        self.flushing: asyncio.Task | None = None

    def submit(self, item) -> asyncio.Future:
        done = self.loop.create_future()
        self.pending.append((item, done))
        if self.flushing is None:
            self.flushing = self.loop.create_task(self._flush())
        return done

    async def _flush(self) -> None:
        group: list = []
        try:
            while self.pending:
                group, self.pending = self.pending, []
                try:
                    answers = list(await self.run([item for item, _ in group]))
                    if len(answers) != len(group):
                        raise RuntimeError(f"a grouped call answered {len(answers)} of {len(group)} callers")
                except Exception as error:  # the whole call failed: every caller in it sees why
                    answers = [error] * len(group)
                for (_, done), answer in zip(group, answers, strict=True):
                    if done.done():
                        continue
                    if isinstance(answer, BaseException):
                        done.set_exception(answer)
                    else:
                        done.set_result(answer)
                group = []
        except BaseException as error:  # cancelled (the loop is closing): nobody waits forever
            for _, done in [*group, *self.pending]:
                if not done.done():
                    done.set_exception(error if isinstance(error, Exception) else asyncio.CancelledError())
            self.pending = []
            raise
        finally:
            self.flushing = None
            per_loop = _groups.get(self.loop)
            if per_loop is not None and per_loop.get(self.key) is self and not self.pending:
                del per_loop[self.key]


async def grouped(key: Hashable, run: Run, item) -> Any:
    """`item`'s answer from `run`, called with every item submitted under `key` on this
    event loop while the call before was in flight. `run` is the one given by the call
    that started the group: callers under one key must pass equivalent ones."""
    loop = asyncio.get_running_loop()
    per_loop = _groups.get(loop)
    if per_loop is None:
        per_loop = _groups[loop] = {}
    group = per_loop.get(key)
    if group is None:
        group = per_loop[key] = _Group(key, run, loop)
    return await group.submit(item)
