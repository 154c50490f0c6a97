"""The event loop every long-running process of ours runs on: uvloop's (libuv, compiled)
where it is installed — on every platform but Windows, as a dependency — else asyncio's.

A single send passes through its process's loop a dozen times (the HTTP request and
answer, each store round trip, the broker hand-over, the SMTP exchange), and asyncio's
pure-Python loop, its transports and its futures were a tenth of the front's CPU; on
uvloop the front answers ~25% more single sends a second (bench.api; the README's
`POSTROOM_EVENT_LOOP` row). `POSTROOM_EVENT_LOOP=asyncio` keeps asyncio's own loop (e.g. to use its debug mode)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

from dramatiq.asyncio import EventLoopThread, set_event_loop_thread
from dramatiq.middleware.asyncio import AsyncIO as DramatiqAsyncIO

try:
    import uvloop
except ImportError:  # not installed (Windows): asyncio's loop does the same work, slower
    uvloop = None

T = TypeVar("T")


def new_loop() -> asyncio.AbstractEventLoop:
    if uvloop is not None and os.environ.get("POSTROOM_EVENT_LOOP", "uvloop").strip().lower() != "asyncio":
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on `new_loop()`."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(main)


class AsyncIO(DramatiqAsyncIO):
    """Dramatiq's AsyncIO middleware (the event-loop thread async actors run on), with
    that thread's loop made by `new_loop`."""

    def before_worker_boot(self, broker, worker):
        thread = EventLoopThread(self.logger)
        thread.loop.close()  # the asyncio loop its constructor made, never run
        thread.loop = new_loop()
        thread.start(timeout=1.0)
        set_event_loop_thread(thread)
