"""The routes every resource repeats, each registered (or answered) in one call: GET one
and DELETE one by id, and a list page. A route module still names each such route, its
path and endpoint, where the hand-written ones stand."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from types import ModuleType
from typing import Any

from quart import Blueprint

from .lookup import deleted, owned
from .pagination import PageQuery, paged
from .responses import one
from .runtime import caller, db
from .validation import query

View = Callable[[dict], Any]  # a document as the API shows it; plain or async


async def _settled(value):
    return await value if inspect.isawaitable(value) else value


def _named(handler, endpoint: str, summary: str | None):
    # The endpoint and the docstring are the OpenAPI operation id and summary.
    handler.__name__ = handler.__qualname__ = endpoint
    handler.__doc__ = summary
    return handler


def read_route(bp: Blueprint, rule: str, endpoint: str, store: ModuleType, noun: str, view: View,
               summary: str | None = None) -> None:
    """GET `rule` (one id variable): the caller's document of `store` through `view`, or 404."""
    async def read(**ids: str):
        [doc_id] = ids.values()
        return one(await _settled(view(await owned(store, doc_id, noun))))
    bp.get(rule, endpoint=endpoint)(_named(read, endpoint, summary))


def delete_route(bp: Blueprint, rule: str, endpoint: str, remove: Callable[..., Awaitable[bool]],
                 noun: str) -> None:
    """DELETE `rule` (one id variable) through `remove(db, workspace_id, id)`, a workflow's
    delete: answers {id, deleted}, or 404 when it removed nothing."""
    async def delete(**ids: str):
        [doc_id] = ids.values()
        return await deleted(remove(db(), caller().workspace_id, doc_id), doc_id, noun)
    bp.delete(rule, endpoint=endpoint)(_named(delete, endpoint, None))


async def page_of(store_page: Callable[..., Awaitable[tuple[list, int]]], params: PageQuery, *,
                  view: View | None = None, page_view: Callable[[list[dict]], Awaitable[list]] | None = None,
                  **filters) -> dict:
    """A list page of the caller's documents, `store_page(db, workspace_id, **filters, limit,
    offset)`, each item through `view` or all at once through `page_view`."""
    items, total = await store_page(db(), caller().workspace_id, limit=params.limit, offset=params.offset,
                                    **filters)
    if page_view is not None:
        items = await page_view(items)
    elif view is not None:
        items = [await _settled(view(d)) for d in items]
    return paged((items, total), params)


def list_route(bp: Blueprint, rule: str, endpoint: str, model: type[PageQuery],
               store_page: Callable[..., Awaitable[tuple[list, int]]], *, by: Iterable[str] = (),
               view: View | None = None, page_view: Callable[[list[dict]], Awaitable[list]] | None = None,
               summary: str | None = None) -> None:
    """GET `rule`: a page_of `store_page` filtered by the `model` query fields named in `by`
    (each passed to the store under its own name)."""
    fields = tuple(by)

    async def listing(params: PageQuery):
        return await page_of(store_page, params, view=view, page_view=page_view,
                             **{name: getattr(params, name) for name in fields})
    bp.get(rule, endpoint=endpoint)(query(model)(_named(listing, endpoint, summary)))
