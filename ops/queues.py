"""Queue inspection for `postroom queues` and `postroom status` (actors/queue_inspection.py):
RabbitMQ's counts, or without RabbitMQ those of the `postroom up` running on an in-process
broker against this store."""

from __future__ import annotations

from actors.queue_inspection import IN_PROCESS_FRESH_SECONDS, IN_PROCESS_SOURCE, in_process_rows, inspect
from mongo import processes
from pipelines.core.clock import in_seconds

from .cli_support import run_store

__all__ = ["IN_PROCESS_SOURCE", "fresh_beats", "in_process", "inspect"]


def fresh_beats(settings) -> list[dict]:
    """The heartbeats recent enough to carry an in-process broker's current counts."""
    return run_store(settings, lambda db: processes.recent(db, in_seconds(-IN_PROCESS_FRESH_SECONDS)))


def in_process(settings) -> list[dict] | None:
    """The queues of the `postroom up` running on an in-process broker against this store,
    as its worker last counted them; None when no such `up` beat lately."""
    return in_process_rows(fresh_beats(settings))
