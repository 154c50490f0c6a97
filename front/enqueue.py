"""Enqueueing from the front. pika blocks, so it runs off the event loop; with publisher
confirms a failed publish raises here and the caller answers 500, never a silent loss."""

from __future__ import annotations

import asyncio
import logging

from pipelines.errors import ServerError

log = logging.getLogger("postroom.front")


async def enqueue(actor, *args, failure_code: str = "internal_error", **kwargs) -> None:
    try:
        await asyncio.to_thread(actor.send, *args, **kwargs)
    except Exception as error:
        log.exception("enqueue to %s failed", actor.queue_name)
        raise ServerError("The work could not be queued; nothing was sent. Retry with backoff.",
                          code=failure_code) from error
