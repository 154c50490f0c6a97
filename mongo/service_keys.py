"""Keys the service itself holds (e.g. the DKIM key of the shared sending domain), one
document per key, `_id` = its name, private parts sealed by the caller."""

from __future__ import annotations

from collections.abc import Callable

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from pipelines.core.clock import now_iso

from .recent import Recent

INDEXES: dict[str, list] = {}
_RECENT = Recent()


async def get_or_create(db: AsyncDatabase, name: str, make: Callable[[], dict]) -> dict:
    """The key named `name`, created with `make()` the first time (as this process read it
    within recent.FRESH_SECONDS: every render job asks). Two processes racing both insert;
    the loser's duplicate key error makes it read the winner's key."""
    return await _RECENT.read(db, name, lambda: _get_or_create(db, name, make))


async def _get_or_create(db: AsyncDatabase, name: str, make: Callable[[], dict]) -> dict:
    doc = await db.service_keys.find_one({"_id": name})
    if doc is not None:
        return doc
    doc = {"_id": name, "created_at": now_iso(), **make()}
    try:
        await db.service_keys.insert_one(doc)
        return doc
    except DuplicateKeyError:
        made = await db.service_keys.find_one({"_id": name})
        assert made is not None, "service keys are never deleted: the one made meanwhile is there"
        return made
