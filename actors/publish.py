"""The one place that publishes to the broker.

Dramatiq's RabbitMQ broker publishes through pika, which blocks on the socket (and, with
publisher confirms, waits for the broker's answer). Called directly from an async actor,
a request handler or a scheduler job it would stall that process's one event loop — every
other job or request in flight on it — for the length of each publish. So every publish
runs here, on one of a few long-lived publishing threads fed by a queue (each with its own
broker connection), one hop for however many jobs the call publishes. Not the loop's
default executor: its per-call bookkeeping cost the front more CPU than the hand-over
itself, and a queue of publishes never waits behind other blocking work there."""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import Callable, Sequence

import dramatiq
import dramatiq.errors
import pika.exceptions
from dramatiq.brokers.rabbitmq import RabbitmqBroker

from pipelines.core.group_commit import grouped
from pipelines.workflows.publisher import PublishFailed

__all__ = ["PublishFailed", "RENDER_CHUNK", "describe", "publish", "publish_chunks", "publish_coalesced",
           "publish_each", "publish_jobs", "refused_by_broker"]

# Ids per render job (its chunk): one bulk read and write per chunk, and several workers
# share a large API batch.
RENDER_CHUNK = 100
# Publishes in flight at once per process: each waits for the broker's confirm, so on a
# busy broker these bound the rate (the loop's default executor had cores + 4).
PUBLISH_THREADS = 8


class _Publishers:
    """The process's publishing threads, started on first use."""

    def __init__(self, threads: int = PUBLISH_THREADS, name: str = "publish"):
        self.threads, self.name = threads, name
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.started = False

    def run(self, work: Callable[[], None]) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        if not self.started:
            with self.lock:
                if not self.started:
                    for n in range(self.threads):
                        threading.Thread(target=self._serve, name=f"{self.name}-{n}", daemon=True).start()
                    self.started = True
        self.jobs.put((work, loop, done))
        return done

    def _serve(self) -> None:
        while True:
            work, loop, done = self.jobs.get()
            try:
                work()
                error = None
            except BaseException as failure:  # handed to the awaiting caller
                error = failure
            try:
                loop.call_soon_threadsafe(_settle, done, error)
            except RuntimeError:  # the caller's loop has closed: nobody waits for it
                pass


def _settle(done: asyncio.Future, error: BaseException | None) -> None:
    if done.cancelled():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


def _health_asker() -> _Publishers:
    # the health check's own thread (and so its own connection): never queued behind
    # publishes that wait for a busy broker's confirms
    return _Publishers(threads=1, name="broker-health")


_publishers, _health = _Publishers(), _health_asker()


def _fresh_after_fork() -> None:
    """A forked child has none of its parent's threads."""
    global _publishers, _health
    _publishers, _health = _Publishers(), _health_asker()


os.register_at_fork(after_in_child=_fresh_after_fork)


def _send(actor, args: tuple, delay_ms: int) -> None:
    if delay_ms:
        actor.send_with_options(args=args, delay=delay_ms)
    else:
        actor.send(*args)


async def publish(actor, *args, delay_ms: int = 0) -> None:
    """One job of `actor` with `args`, after `delay_ms` (the broker's delay queue)."""
    await publish_jobs(actor, [args], delay_ms=delay_ms)


async def publish_jobs(actor, jobs: Sequence[tuple], *, delay_ms: int = 0,
                       carried=lambda args: list(args[:1])) -> None:
    """One job of `actor` per argument tuple, in order, in one thread hop. At the first
    job the broker does not take: PublishFailed naming what that job and every later one
    carried (`carried(args)`: by default the job's first argument)."""
    def publish_all() -> None:
        for n, args in enumerate(jobs):
            try:
                _send(actor, args, int(delay_ms))
            except Exception as error:
                raise PublishFailed([item for rest in jobs[n:] for item in carried(rest)], error,
                                    refused=refused_by_broker(error), reason=describe(error),
                                    queue=actor.queue_name) from error
    if jobs:
        await _publishers.run(publish_all)


async def publish_each(actor, items: Sequence, *, delay_ms: int = 0) -> None:
    """One job of `actor` per item (`actor(item)`), e.g. a webhook delivery or a report."""
    await publish_jobs(actor, [(item,) for item in items], delay_ms=delay_ms,
                       carried=lambda args: [args[0]])


async def publish_chunks(actor, ids: Sequence, *, size: int = RENDER_CHUNK, delay_ms: int = 0,
                         more: Callable[[], tuple] = tuple) -> None:
    """`actor(chunk, *more())` for every `size` ids, in order; PublishFailed names the ids
    of the chunks not published."""
    ids = list(ids)
    await publish_jobs(actor, [(ids[start:start + size], *more()) for start in range(0, len(ids), size)],
                       delay_ms=delay_ms, carried=lambda args: list(args[0]))


def _own_failure(failure: BaseException | None, mine: list) -> BaseException | None:
    """What a publish's failure means to one caller: its ids the broker did not take (none:
    its chunk went out before the failing one)."""
    if not isinstance(failure, PublishFailed):
        return failure
    unpublished = set(failure.unpublished)
    left = [i for i in mine if i in unpublished]
    if not left:
        return None
    return PublishFailed(left, failure.cause, refused=failure.refused, reason=failure.reason, queue=failure.queue)


async def publish_coalesced(actor, ids: Sequence, *, tag: str = "",
                            more: Callable[[list[str]], tuple] = lambda tags: ()) -> None:
    """`actor(chunk, *more(tags))` for every RENDER_CHUNK ids, as publish_chunks, sharing
    chunks with the calls made on this event loop while an earlier publish of `actor` is
    in flight (pipelines.core.group_commit). `tag`: what this caller says of its ids (a render
    job's born claim); `more` is given the tags of the ids its chunk carries. Grouping:
    at low load every call publishes at once as before; under load, e.g. a front answering
    many single sends at the same time, a render job carries many messages instead of one,
    so the render and send step's per-job costs (a claim, the reads around rendering, the
    outcome writes, the limits) are shared. Each caller still awaits the publish that
    carries its ids and sees only the failure of its own ids."""
    async def run(tagged_lists: list[list[tuple]]) -> list:
        tagged = [item for mine in tagged_lists for item in mine]
        chunks = [tagged[start:start + RENDER_CHUNK] for start in range(0, len(tagged), RENDER_CHUNK)]
        try:
            await publish_jobs(actor, [([i for i, _ in chunk], *more([t for _, t in chunk])) for chunk in chunks],
                               carried=lambda args: list(args[0]))
            failure = None
        except Exception as error:
            failure = error
        return [_own_failure(failure, [i for i, _ in mine]) for mine in tagged_lists]
    await grouped(("publish", actor), run, [(i, tag) for i in ids])


def _cause(error: BaseException) -> BaseException:
    if isinstance(error, PublishFailed):
        error = error.cause
    return error.args[0] if isinstance(error, dramatiq.errors.ConnectionClosed) and error.args else error


def refused_by_broker(error: BaseException) -> bool:
    """The broker answered and said no (a nack — e.g. a queue at its length limit with
    `reject-publish` — or a channel closed over the message, e.g. larger than its
    maximum), as against the broker being unreachable."""
    return isinstance(_cause(error), (pika.exceptions.NackError, pika.exceptions.UnroutableError,
                                      pika.exceptions.ChannelClosedByBroker))


def describe(error: BaseException) -> str:
    """A publish failure in a line (never the message it carried)."""
    cause = _cause(error)
    return f"{type(cause).__name__}: {cause}"


async def broker_answers() -> bool:
    """Whether the broker answers, asked on a thread of the health check's own whose
    connection is kept between checks (one AMQP handshake, not one a check)."""
    def ask() -> None:
        broker = dramatiq.get_broker()
        if not isinstance(broker, RabbitmqBroker):
            return
        try:  # (`connection` connects on first use)
            broker.connection.process_data_events(0)
        except (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError):
            # a connection idle between checks is closed by the broker once heartbeats
            # go unanswered (pika answers them only when called): ask once more anew
            del broker.connection
            broker.connection.process_data_events(0)
    try:
        await _health.run(ask)
        return True
    except Exception:  # any failure means unreachable to a health check
        return False
