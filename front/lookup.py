"""The one "load or 404": a route that reads, changes or deletes one document answers
404 through here when the document is not there (spec §7: `not_found` unless a code is given)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from types import ModuleType

from pipelines.core.errors import NotFound

from .responses import one
from .runtime import caller, db


def no_such(noun: str) -> str:
    return f"No such {noun} in this workspace."


async def found(loaded, message: str, *, code: str | None = None, path: str | None = None):
    """`loaded` (a value, or a store call's coroutine, awaited here) unless nothing was there:
    None, or False from a write that matched nothing; then 404 with this message, code and path."""
    if inspect.isawaitable(loaded):
        loaded = await loaded
    if loaded is None or loaded is False:
        raise NotFound(message, code=code, path=path)
    return loaded


async def owned(store: ModuleType, doc_id: str, noun: str) -> dict:
    """The caller's document `doc_id` from `store` (a mongo module with `get(db, workspace_id, id)`)."""
    return await found(store.get(db(), caller().workspace_id, doc_id), no_such(noun))


async def deleted(removal: Awaitable[bool], doc_id: str, noun: str):
    """Answers {id, deleted} once `removal` (a delete of the caller's `doc_id`) removed it."""
    await found(removal, no_such(noun))
    return one({"id": doc_id, "deleted": True})


async def updated(change: Callable[..., Awaitable[dict | None]], doc_id: str, noun: str, changes: dict,
                  current: dict | None = None, **options) -> dict:
    """The caller's document after `change(db, workspace_id, id, changes, **options)` (a
    workflow's update), or `current` as it is when there is nothing to change."""
    if not changes and current is not None:
        return current
    return await found(change(db(), caller().workspace_id, doc_id, changes, **options), no_such(noun))
