"""Worker heartbeats: a Dramatiq middleware that, once the worker has booted, writes the
process's heartbeat (mongo.processes) every HEARTBEAT_SECONDS from the AsyncIO
middleware's event loop (the loop that owns the worker's store client), so `postroom
status` lists the worker processes alive and the queues they consume."""

from __future__ import annotations

import asyncio

import dramatiq
from dramatiq.asyncio import get_event_loop_thread

from mongo import processes

from . import runtime


class Heartbeat(dramatiq.Middleware):
    def __init__(self) -> None:
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def after_worker_boot(self, broker, worker) -> None:
        loop_thread = get_event_loop_thread()
        if loop_thread is None:
            return
        queues = sorted(getattr(worker, "queues", None) or broker.get_declared_queues())

        async def start() -> None:
            self._stop = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(
                processes.beat_until(runtime.store(), "worker", self._stop, queues=queues))
        loop_thread.run_coroutine(start())

    def before_worker_shutdown(self, broker, worker) -> None:
        loop_thread = get_event_loop_thread()
        if loop_thread is not None and self._stop is not None:
            loop_thread.loop.call_soon_threadsafe(self._stop.set)
