"""Worker lifecycle middlewares around Dramatiq's AsyncIO one:

- `Heartbeat` (after AsyncIO): once the worker has booted, writes the process's heartbeat
  (mongo.processes) every HEARTBEAT_SECONDS from the AsyncIO event loop (the loop that
  owns the worker's store client), so `postroom status` lists the worker processes alive
  and the queues they consume;
- `CloseResources` (before AsyncIO, whose shutdown stops the loop): at worker shutdown,
  stops the heartbeat and closes the loop's store client and mail transport on that loop
  (actors.runtime.close), so nothing is left to be closed after the loop is gone."""

from __future__ import annotations

import asyncio

import dramatiq
from dramatiq.asyncio import get_event_loop_thread

from mongo import processes

from . import runtime


class Heartbeat(dramatiq.Middleware):
    def after_worker_boot(self, broker, worker) -> None:
        loop_thread = get_event_loop_thread()
        if loop_thread is None:
            return
        queues = sorted(worker.consumer_whitelist or broker.get_declared_queues())

        async def start() -> None:
            stop = asyncio.Event()
            task = asyncio.get_running_loop().create_task(
                processes.beat_until(runtime.store(), "worker", stop, queues=queues))

            async def finish() -> None:
                stop.set()
                await task
            runtime.on_close(finish)
        loop_thread.run_coroutine(start())


class CloseResources(dramatiq.Middleware):
    def before_worker_shutdown(self, broker, worker) -> None:
        loop_thread = get_event_loop_thread()
        if loop_thread is not None and loop_thread.loop.is_running():
            loop_thread.run_coroutine(runtime.close())
