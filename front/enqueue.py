"""Enqueueing from the front, through the one publisher (actors/jobs.BrokerPublisher):
with publisher confirms a failed publish raises here and the caller answers 500, never a
silent loss."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from pymongo.errors import ConnectionFailure

from actors.runtime import publisher
from pipelines.core.errors import PostroomError
from pipelines.workflows.publisher import Publisher, not_queued

T = TypeVar("T")


async def enqueue(hand_on: Callable[[Publisher], Awaitable[T]], *, failure_code: str = "internal_error") -> T:
    """What `hand_on(publisher)` returns; a failure to publish becomes 500 `failure_code`
    whose `unpublished` names the items whose jobs were not published. An unreachable store
    (`hand_on` may be a workflow that writes before it publishes) stays the 503 it is."""
    try:
        return await hand_on(publisher())
    except (PostroomError, ConnectionFailure):
        raise
    except Exception as error:
        raise not_queued(error, failure_code) from error
