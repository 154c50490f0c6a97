"""Per-process resources for actors: settings, one store client and one mail transport,
both created lazily on the AsyncIO middleware's event-loop thread (the loop that owns them)."""

from __future__ import annotations

import asyncio

from pymongo.asynchronous.database import AsyncDatabase

from mongo.client import connect
from pipelines.adapters.smtp_client import transport_for
from pipelines.core.settings import Settings
from pipelines.workflows.publisher import Publisher

_settings: Settings | None = None
_publisher: Publisher | None = None
_queues: set[str] | None = None   # what this worker consumes; None: every queue
_per_loop: dict[int, dict] = {}


def configure(settings: Settings, publisher: Publisher | None = None) -> None:
    global _settings, _publisher
    _settings, _publisher = settings, publisher


def serve_queues(queues: set[str] | None) -> None:
    """The queues this process's worker consumes (None: all of them), set as it boots."""
    global _queues
    _queues = set(queues) if queues else None


def serves(queue: str) -> bool:
    return _queues is None or queue in _queues


def publisher() -> Publisher:
    """The one publisher (actors/jobs.BrokerPublisher) bound to this process's broker."""
    if _publisher is None:
        raise RuntimeError("actors.runtime is not configured; call actors.broker.setup first")
    return _publisher


def settings() -> Settings:
    if _settings is None:
        raise RuntimeError("actors.runtime is not configured; call actors.broker.setup first")
    return _settings


def _resources() -> dict:
    loop = asyncio.get_running_loop()
    resources = _per_loop.get(id(loop))
    if resources is None or resources["loop"] is not loop:
        resources = {"loop": loop}
        _per_loop[id(loop)] = resources
    return resources


def store() -> AsyncDatabase:
    resources = _resources()
    if "db" not in resources:
        s = settings()
        if not s.mongodb_url:
            raise RuntimeError("POSTROOM_MONGODB_URL is not set for this worker")
        resources["client"], resources["db"] = connect(s.mongodb_url, s.mongodb_database)
    return resources["db"]


def transport():
    resources = _resources()
    if "transport" not in resources:
        resources["transport"] = transport_for(settings())
        if resources.get("draining"):
            resources["transport"].drain()
    return resources["transport"]


async def drain() -> None:
    """The worker is stopping: the jobs in hand finish, but start no new SMTP transaction
    (pipelines/adapters/smtp_client.py `_Starts`); what they had not started goes back to the queue."""
    resources = _resources()
    resources["draining"] = True
    if "transport" in resources:
        resources["transport"].drain()


def on_close(closer) -> None:
    """Run `closer` (an async callable) when this loop's resources are closed."""
    _resources().setdefault("closers", []).append(closer)


async def close() -> None:
    """Close this loop's resources (a worker shutting down, before its loop stops): what
    asked to be told first (the heartbeat), then the mail transport and the store client.
    An async store client left to the garbage collector after its loop closed prints
    "Event loop is closed" tracebacks at exit."""
    resources = _per_loop.pop(id(asyncio.get_running_loop()), None) or {}
    for closer in resources.get("closers", []):
        await closer()
    if "transport" in resources:
        await resources["transport"].close()
    if "client" in resources:
        await resources["client"].close()
