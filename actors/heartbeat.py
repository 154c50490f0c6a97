"""Worker lifecycle middlewares around Dramatiq's AsyncIO one:

- `Heartbeat` (after AsyncIO): once the worker has booted, writes the process's heartbeat
  (mongo.processes) every HEARTBEAT_SECONDS from the AsyncIO event loop (the loop that
  owns the worker's store client), so `postroom status` lists the worker processes alive
  and the queues they consume;
- `CloseResources`: a stop is routine, so it closes nothing while jobs are in hand.
  When the stop begins (`before_worker_shutdown`, emitted *before* Dramatiq joins its
  worker threads) it only drains the mail transport (actors.runtime.drain): transactions
  in flight finish, later ones are not started and go back to the queue, so the jobs in
  hand end quickly and record everything they sent. Once every worker thread has been
  joined (`after_worker_shutdown`, which runs before AsyncIO's because `emit_after` walks
  the middleware in reverse and this one is added after AsyncIO) it stops the heartbeat
  and closes the store client and the transport on their loop (actors.runtime.close)."""

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
        _on_loop(runtime.drain)

    def after_worker_shutdown(self, broker, worker) -> None:
        _on_loop(runtime.close)


def _on_loop(step) -> None:
    loop_thread = get_event_loop_thread()
    if loop_thread is not None and loop_thread.loop.is_running():
        loop_thread.run_coroutine(step())
