"""Finding a workspace's messages (GET /email): newest first by `created_ms` (then `_id`),
filtered by recipient, status, tag, metadata pair, stream, campaign and a time window.

Why it is shaped so (docs/store-notes.md, measured in bench/store_scale.py `api_shapes`):
the embedded store answers an aggregate's `$match` of equalities and one integer range,
sorted by the indexed integer, from a compound index `(workspace_id, <field>, created_ms)`
— while `find` with an equality, a date-like string, `$in`, `$or`, or any filter on an
array reads every message. And it has no multikey indexes: equality on an array field
matches nothing. So:
- the scalar filters (`status`, `stream`, `campaign_id`, and `to_key`: the message's
  first recipient, lower-cased) each have their compound index on `messages`, and a page
  is one aggregate (`$count` for the total, answered from the same index);
- what a message holds several of — the recipients after the first (`to`, `cc`, `bcc`),
  its `tags` and its `metadata_pairs` — is written once, at intake, as one small document
  per value in `message_keys` (`key` "to:<address>", "tag:<name>", "meta:<k>=<v>"; with the
  message's `created_ms` and its immutable `stream` / `campaign_id`), found by the index
  `(workspace_id, key, created_ms)`; the message's own status is then checked on the
  messages read (by `_id`). A message with one recipient, no tags and no metadata (all of
  a campaign's) costs no key document at all.
A `to` filter reads both: messages whose first recipient it is, and keys of the others
(disjoint: the first recipient is never a key).

Cursor: the (created_ms, _id) of the last item of a page; the next page is what sorts
after it, so messages stored meanwhile (newer) never shift it."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from pipelines.core.clock import ms_of

INDEXES: dict[str, list] = {
    "messages": [
        IndexModel([("workspace_id", ASCENDING), ("created_ms", DESCENDING)], name="ws_created_ms"),
        IndexModel([("workspace_id", ASCENDING), ("to_key", ASCENDING), ("created_ms", DESCENDING)],
                   name="ws_to_created_ms"),
        IndexModel([("workspace_id", ASCENDING), ("status", ASCENDING), ("created_ms", DESCENDING)],
                   name="ws_status_created_ms"),
        IndexModel([("workspace_id", ASCENDING), ("stream", ASCENDING), ("created_ms", DESCENDING)],
                   name="ws_stream_created_ms"),
        IndexModel([("workspace_id", ASCENDING), ("campaign_id", ASCENDING), ("created_ms", DESCENDING)],
                   name="ws_campaign_created_ms"),
    ],
    "message_keys": [
        IndexModel([("workspace_id", ASCENDING), ("key", ASCENDING), ("created_ms", DESCENDING)],
                   name="ws_key_created_ms"),
        IndexModel([("message_id", ASCENDING)], name="message"),
    ],
}

# What a list item never carries: the bodies and the history (GET /email/:id has them).
_LIST_PROJECTION = {"html": 0, "text": 0, "history": 0, "template_data": 0, "template_data_json": 0,
                    "attachments": 0, "recipients_result": 0, "smtp_attempts": 0}
DUPLICATE_KEY = 11000
_BATCH = 100  # keys read at a time when the messages they name are checked here
# A key whose messages are narrowed further (a tag and a status): its matches are counted
# exactly up to this many keys; past it `total` is the key's own count, an upper bound, and
# the page says so (`exact` False) — counting them all would read every one.
COUNT_CAP = 100


def recipients(doc: dict) -> list[str]:
    """Every address a message goes to: `to`, then `cc` and `bcc` when it has them."""
    found: list[str] = []
    for field in ("to", "cc", "bcc"):
        value = doc.get(field) or []
        found += [value] if isinstance(value, str) else list(value)
    return found


def to_key(doc: dict) -> str:
    """The message's first recipient, lower-cased ("" for none): what `to=` finds first."""
    found = recipients(doc)
    return found[0].lower() if found else ""


def keys_of(doc: dict) -> list[str]:
    """The `message_keys` a message needs: its other recipients, tags and metadata pairs."""
    first = doc.get("to_key", to_key(doc))
    keys = [f"to:{r.lower()}" for r in recipients(doc) if r.lower() != first]
    keys += [f"tag:{t}" for t in doc.get("tags") or []]
    keys += [f"meta:{p}" for p in doc.get("metadata_pairs") or []]
    return list(dict.fromkeys(keys))


async def insert_keys(db: AsyncDatabase, docs: list[dict]) -> None:
    """The key documents of new messages, before the messages themselves (a key whose
    message never got stored names nothing and is skipped when read); an id already
    present is this request's earlier attempt."""
    rows = [{"_id": f"{d['_id']}|{key}", "workspace_id": d["workspace_id"], "key": key, "message_id": d["_id"],
             "created_ms": d.get("created_ms", ms_of(d["created_at"])), "stream": d.get("stream"),
             "campaign_id": d.get("campaign_id")} for d in docs for key in keys_of(d)]
    for first in range(0, len(rows), 100):
        try:
            await db.message_keys.insert_many(rows[first:first + 100], ordered=False)
        except BulkWriteError as error:
            if any(e.get("code") != DUPLICATE_KEY for e in error.details.get("writeErrors", [])):
                raise


@dataclasses.dataclass(frozen=True)
class Filters:
    """A GET /email query, as the store reads it. `since_ms`/`until_ms`: [since, until)."""
    to: str | None = None
    status: str | None = None
    tag: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    stream: str | None = None
    campaign_id: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def scalars(self) -> dict:
        return {k: v for k, v in (("status", self.status), ("stream", self.stream),
                                  ("campaign_id", self.campaign_id)) if v is not None}

    def window(self, after: tuple[int, str] | None = None) -> dict:
        upper = self.until_ms
        if after is not None:  # ties on the cursor's millisecond are read apart (_ties)
            upper = after[0] if upper is None else min(upper, after[0])
        bounds = {**({"$gte": self.since_ms} if self.since_ms is not None else {}),
                  **({"$lt": upper} if upper is not None else {})}
        return {"created_ms": bounds} if bounds else {}

    def key(self) -> str | None:
        """The `message_keys` key this query is driven by, if any."""
        if self.tag is not None:
            return f"tag:{self.tag}"
        if self.metadata:
            return "meta:{}={}".format(*self.metadata[0])
        return None

    def holds(self, doc: dict) -> bool:
        """Checked on a message read by its key: what the key's index did not filter."""
        if any(doc.get(k) != v for k, v in self.scalars().items()):
            return False
        if self.tag is not None and self.tag not in (doc.get("tags") or []):
            return False
        if any((doc.get("metadata") or {}).get(k) != v for k, v in self.metadata):
            return False
        return self.to is None or self.to.lower() in {r.lower() for r in recipients(doc)}


ORDER = {"created_ms": -1, "_id": -1}


def after_cursor(doc: dict) -> tuple[int, str]:
    return int(doc["created_ms"]), str(doc["_id"])


class _Source:
    """Messages matching the query from one index, newest first: `fetch(after, n)`
    returns up to n of them sorted after `after` (None: from the newest), `count()` how
    many in all."""
    fetch: Callable[[tuple[int, str] | None, int], Awaitable[list[dict]]]
    count: Callable[[], Awaitable[tuple[int, bool]]]  # how many, and whether exactly


async def _aggregate(collection, match: dict, n: int, projection: dict | None = None) -> list[dict]:
    pipeline: list[dict] = [{"$match": match}, {"$sort": ORDER}, {"$limit": n}]
    if projection:
        pipeline.append({"$project": projection})
    return await (await collection.aggregate(pipeline)).to_list()


async def _counted(collection, match: dict) -> int:
    # `$count`: answered from the index, where count_documents' `$group` reads every document
    counted = await (await collection.aggregate([{"$match": match}, {"$count": "n"}])).to_list()
    return int(counted[0]["n"]) if counted else 0


async def _ordered_after(collection, base: dict, filters: Filters, after: tuple[int, str] | None, n: int,
                         projection: dict | None = None) -> list[dict]:
    """Up to n documents of `base` within the window, sorted after `after`: the ties on
    its millisecond (few), then the older ones — two indexed reads, never an `$or`."""
    ties: list[dict] = []
    if after is not None and (filters.since_ms is None or after[0] >= filters.since_ms) \
            and (filters.until_ms is None or after[0] < filters.until_ms):
        ties = await _aggregate(collection, {**base, "created_ms": after[0], "_id": {"$lt": after[1]}}, n,
                                projection)
    if len(ties) >= n:
        return ties[:n]
    return ties + await _aggregate(collection, {**base, **filters.window(after)}, n - len(ties), projection)


def _message_source(db: AsyncDatabase, workspace_id: str, filters: Filters) -> _Source:
    base = {"workspace_id": workspace_id, **filters.scalars()}
    if filters.to is not None:
        base["to_key"] = filters.to.lower()
    source = _Source()

    async def fetch(after, n):
        return await _ordered_after(db.messages, base, filters, after, n, _LIST_PROJECTION)

    async def count():
        return await _counted(db.messages, {**base, **filters.window()}), True
    source.fetch, source.count = fetch, count
    return source


def _key_source(db: AsyncDatabase, workspace_id: str, key: str, filters: Filters) -> _Source:
    """Messages named by `key`, each checked against the rest of the query (Filters.holds)
    once read by `_id`: a query that narrows a key further reads that key's messages."""
    base = {"workspace_id": workspace_id, "key": key}
    # stream and campaign are on the keys too (a message's are fixed at intake)
    base.update({k: v for k, v in (("stream", filters.stream), ("campaign_id", filters.campaign_id))
                 if v is not None})
    checked = filters.status is not None or len(filters.metadata) > (0 if filters.tag is not None else 1) \
        or (filters.to is not None and not key.startswith("to:"))
    source = _Source()

    async def fetch(after, n):
        found: list[dict] = []
        # a key's `_id` is "<message id>|<key>": it sorts as its message's does
        after = (after[0], f"{after[1]}|{key}") if after is not None else None
        while len(found) < n:
            keys = await _ordered_after(db.message_keys, base, filters, after, _BATCH if checked else n - len(found))
            if not keys:
                break
            # `_id` alone, flat: the embedded store's fast path (a field beside it reads them all)
            docs = {d["_id"]: d for d in await db.messages.find(
                {"_id": {"$in": [k["message_id"] for k in keys]}}, _LIST_PROJECTION).to_list()}
            for k in keys:
                doc = docs.get(k["message_id"])
                if doc is not None and doc["workspace_id"] == workspace_id and filters.holds(doc):
                    found.append(doc)
            after = (int(keys[-1]["created_ms"]), str(keys[-1]["_id"]))
        return sorted(found, key=lambda d: after_cursor(d), reverse=True)[:n]

    async def count():
        keys = await _counted(db.message_keys, {**base, **filters.window()})
        if not checked:
            return keys, True
        if keys > COUNT_CAP:
            return keys, False
        return len(await fetch(None, 2**31)), True
    source.fetch, source.count = fetch, count
    return source


def _sources(db: AsyncDatabase, workspace_id: str, filters: Filters) -> list[_Source]:
    key = filters.key()
    if key is not None:
        return [_key_source(db, workspace_id, key, filters)]
    sources = [_message_source(db, workspace_id, filters)]
    if filters.to is not None:
        sources.append(_key_source(db, workspace_id, f"to:{filters.to.lower()}", filters))
    return sources


@dataclasses.dataclass(frozen=True)
class Page:
    items: list[dict]
    total: int
    exact: bool  # False: `total` is an upper bound (COUNT_CAP)


async def list_page(db: AsyncDatabase, workspace_id: str, filters: Filters, *, limit: int, offset: int = 0,
                    after: tuple[int, str] | None = None) -> Page:
    """A page of the workspace's messages matching `filters`, newest first, after the
    cursor `after` (or skipping `offset`), and how many match in all."""
    sources = _sources(db, workspace_id, filters)
    merged: list[dict] = []
    for source in sources:
        merged += await source.fetch(after, offset + limit)
    merged.sort(key=after_cursor, reverse=True)
    counts = [await source.count() for source in sources]
    return Page(merged[offset:offset + limit], sum(n for n, _ in counts), all(exact for _, exact in counts))
