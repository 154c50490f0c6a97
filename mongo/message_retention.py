"""The retention job's reads and writes (pipelines/workflows/message_retention.py): per
workspace, its oldest messages by `created_ms` — an aggregate over the index
`(workspace_id, created_ms)` (mongo/message_search.py), an integer range, never a date
string — and writes by `_id`, a bounded number per call.

Bodies are dropped in `created_ms` order from a mark kept per workspace
(`retention_marks`, `_id` the workspace: the `created_ms` up to which they are gone), so a
pass never reads the messages whose bodies went in an earlier one."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso

from . import message_search

# What a message's bodies are: what it said (html, text, its template data, attachments
# when it has them). The rendered MIME is never stored (mongo/messages.py).
BODY_FIELDS = ("html", "text", "template_data", "template_data_json", "attachments")


async def workspace_ids(db: AsyncDatabase) -> list[str]:
    return [w["_id"] for w in await db.workspaces.find({}, {"_id": 1}).to_list()]


async def _oldest(db: AsyncDatabase, workspace_id: str, since_ms: int, before_ms: int, limit: int,
                  fields: dict) -> list[dict]:
    cursor = await db.messages.aggregate([
        {"$match": {"workspace_id": workspace_id, "created_ms": {"$gte": since_ms, "$lt": before_ms}}},
        {"$sort": {"created_ms": 1, "_id": 1}}, {"$limit": limit}, {"$project": fields}])
    return await cursor.to_list()


async def drop_bodies(db: AsyncDatabase, workspace_id: str, before_ms: int, limit: int) -> int:
    """Bodies of up to `limit` messages created before `before_ms`, from the workspace's
    mark on; how many messages were read."""
    mark = await db.retention_marks.find_one({"_id": workspace_id})
    since = int(mark["bodies_ms"]) if mark else 0
    if since >= before_ms:
        return 0
    found = await _oldest(db, workspace_id, since, before_ms, limit, {"_id": 1, "created_ms": 1})
    if found:
        await db.messages.update_many({"_id": {"$in": [d["_id"] for d in found]}},
                                      {"$set": {**dict.fromkeys(BODY_FIELDS), "bodies_dropped_at": now_iso()}})
    # the mark moves past what was read; a full batch may end inside a millisecond, so it
    # stays on that millisecond (read again next time, harmlessly) unless the range is done
    reached = before_ms if len(found) < limit else int(found[-1]["created_ms"])
    await db.retention_marks.replace_one({"_id": workspace_id}, {"_id": workspace_id, "bodies_ms": reached},
                                         upsert=True)
    return len(found)


async def delete_messages(db: AsyncDatabase, workspace_id: str, before_ms: int, limit: int) -> int:
    """Up to `limit` messages created before `before_ms`, deleted with their search keys;
    how many."""
    found = await _oldest(db, workspace_id, 0, before_ms, limit,
                          {"_id": 1, "to": 1, "cc": 1, "bcc": 1, "to_key": 1, "tags": 1, "metadata_pairs": 1})
    if not found:
        return 0
    keys = [f"{d['_id']}|{key}" for d in found for key in message_search.keys_of(d)]
    if keys:
        await db.message_keys.delete_many({"_id": {"$in": keys}})
    await db.messages.delete_many({"_id": {"$in": [d["_id"] for d in found]}})
    return len(found)
