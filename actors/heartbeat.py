"""Worker lifecycle middlewares around Dramatiq's AsyncIO one:

- `Heartbeat` (after AsyncIO): once the worker has booted, writes the process's heartbeat
  (mongo.processes) every HEARTBEAT_SECONDS from the AsyncIO event loop (the loop that
  owns the worker's store client), so `postroom status` lists the worker processes alive
  and the queues they consume; on the in-process broker of `postroom up`, every
  IN_PROCESS_QUEUES_SECONDS with the queues' counts, which `postroom queues` reads;
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
from dramatiq.brokers.stub import StubBroker
from dramatiq.common import dq_name, xq_name

from mongo import processes

from . import runtime

# How often `postroom up`'s in-process broker writes its queue counts, and the field they go in.
IN_PROCESS_QUEUES_SECONDS = 2.0
IN_PROCESS_QUEUES_FIELD = "broker_queues"


def in_process_queue_counts(broker: StubBroker) -> list[dict]:
    """Ready / unacked per queue of the in-process broker, as RabbitMQ counts them. A
    queue's unfinished tasks are the messages put and not yet acked or nacked: those not
    waiting in it are the ones a worker took (running, or held until their delay is due).
    Dead letters are kept apart by the stub, per queue consumed (the queue and its .DQ).
    A list of {queue, ready, unacked}, not a dict by name: queue names hold dots."""
    counts = []
    for name in sorted(broker.get_declared_queues() - broker.get_declared_delay_queues()):
        for queue_name in (name, dq_name(name)):
            waiting = broker.queues[queue_name]
            ready = waiting.qsize()
            counts.append({"queue": queue_name, "ready": ready,
                           "unacked": max(0, waiting.unfinished_tasks - ready)})
        dead = sum(len(broker.dead_letters_by_queue.get(q, ())) for q in (name, dq_name(name)))
        counts.append({"queue": xq_name(name), "ready": dead, "unacked": 0})
    return counts


class Heartbeat(dramatiq.Middleware):
    def after_worker_boot(self, broker, worker) -> None:
        loop_thread = get_event_loop_thread()
        if loop_thread is None:
            return
        queues = sorted(worker.consumer_whitelist or broker.get_declared_queues())
        # The in-process broker of `postroom up` has no management API: its heartbeat carries
        # the queues' counts instead (`postroom queues`), more often, to be worth reading.
        in_process = isinstance(broker, StubBroker)
        snapshot = (lambda: {IN_PROCESS_QUEUES_FIELD: in_process_queue_counts(broker)}) if in_process else None
        interval = IN_PROCESS_QUEUES_SECONDS if in_process else processes.HEARTBEAT_SECONDS

        async def start() -> None:
            db, stop = runtime.store(), asyncio.Event()
            task = asyncio.get_running_loop().create_task(
                processes.beat_until(db, "worker", stop, interval, snapshot, queues=queues))

            async def finish() -> None:
                stop.set()
                await task
                if in_process:  # a stopped `up`'s last counts must not read as current
                    await processes.forget(db, "worker", IN_PROCESS_QUEUES_FIELD)
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
