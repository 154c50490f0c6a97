"""Enqueueing from inside an async actor (or a scheduler job).

Dramatiq's RabbitMQ broker publishes through pika, which blocks on the socket (and, with
publisher confirms, waits for the broker's answer). Called directly from an async actor it
would stall the worker's one event loop — every other job in flight on it, SMTP sessions
included — for the length of each publish. So every publish goes through this one helper,
which runs it on a thread."""

from __future__ import annotations

import asyncio


async def publish(actor, *args, **options) -> None:
    """`actor.send(*args)` off the event loop; with options (e.g. `delay=` in ms),
    `actor.send_with_options(args=args, **options)`."""
    if options:
        await asyncio.to_thread(actor.send_with_options, args=args, **options)
    else:
        await asyncio.to_thread(actor.send, *args)


def _cause(error: BaseException) -> BaseException:
    import dramatiq.errors
    return error.args[0] if isinstance(error, dramatiq.errors.ConnectionClosed) and error.args else error


def refused_by_broker(error: BaseException) -> bool:
    """The broker answered and said no (a nack — e.g. a queue at its length limit with
    `reject-publish` — or a channel closed over the message, e.g. larger than its
    maximum), as against the broker being unreachable."""
    import pika.exceptions
    return isinstance(_cause(error), (pika.exceptions.NackError, pika.exceptions.UnroutableError,
                                      pika.exceptions.ChannelClosedByBroker))


def describe(error: BaseException) -> str:
    """A publish failure in a line (never the message it carried)."""
    cause = _cause(error)
    return f"{type(cause).__name__}: {cause}"
