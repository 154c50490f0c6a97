"""Enqueueing from the front. pika blocks, so it runs off the event loop; with publisher
confirms a failed publish raises here and the caller answers 500, never a silent loss."""

from __future__ import annotations

import asyncio
import logging

from pipelines.errors import ServerError, one_line

log = logging.getLogger("postroom.front")


async def enqueue(actor, *args, failure_code: str = "internal_error", **kwargs) -> None:
    try:
        await asyncio.to_thread(actor.send, *args, **kwargs)
    except Exception as error:
        # Only the queue and the reason: the arguments may carry addresses or content.
        log.warning("enqueue to %s failed: %s", actor.queue_name, one_line(error))
        raise ServerError("The work could not be queued; nothing was sent. Retry with backoff.",
                          code=failure_code) from error
