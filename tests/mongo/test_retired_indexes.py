"""Message indexes no query uses are dropped at start (mongo/messages.drop_retired_indexes),
so message writes stop paying for them; the ones in use stay."""

from __future__ import annotations

from pymongo import ASCENDING, IndexModel

from mongo import indexes, messages


def keys(db_thread) -> list[dict]:
    async def read(db):
        return [dict(i["key"]) for i in await (await db.messages.list_indexes()).to_list()]
    return db_thread.run(read)


def test_an_index_an_earlier_version_made_is_dropped_at_start_and_the_live_ones_stay(private_db):
    private_db.run(lambda db: db.messages.create_indexes([
        IndexModel([("batch_id", ASCENDING)], name="batch"),
        IndexModel([("status", ASCENDING), ("due_at", ASCENDING)], name="status_due")]))
    assert {"batch_id": 1} in keys(private_db)
    private_db.run(indexes.prepare_store)
    kept = keys(private_db)
    assert {"batch_id": 1} not in kept and {"status": 1, "due_at": 1} not in kept
    for live in ({"due_ms": 1}, {"stall_ms": 1}, {"campaign_id": 1, "status": 1}):
        assert live in kept
    assert private_db.run(messages.drop_retired_indexes) == []  # nothing more to do next time
