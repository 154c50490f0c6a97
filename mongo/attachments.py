"""`attachments`: the bytes of files sent with transactional email, one document a file
per workspace and content (`_id` = `<workspace id>:<sha256>`), apart from the messages
that send them. A message keeps only a reference (filename, type, content id, sha256,
size: pipelines/messages/attachments.AttachmentFile.reference), so its document stays
small on the hot path (the send step reads messages by the hundred) and far from the
store's 16 MB document limit, and one file sent to a thousand recipients of a batch is
stored once. Files are written before the messages that name them, so a render never
finds a message whose bytes are not there yet.

A file's `used_ms` is when the newest message naming it was accepted: the retention job
deletes it once that is older than the body retention (`expired`), when every message
naming it has had its bodies dropped (docs/email.md, Retention)."""

from __future__ import annotations

from bson import Binary
from pymongo import ASCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso, now_ms
from pipelines.messages.attachments import AttachmentFile, store_key

from .documents import insert_all_new


async def store(db: AsyncDatabase, workspace_id: str, files: list[AttachmentFile]) -> None:
    """Each file not stored yet, once (a file already there is not written again: in the
    embedded store a rewrite of a 10 MB document costs most of a second)."""
    wanted = {store_key(workspace_id, f.sha256): f for f in files}
    if not wanted:
        return
    used = now_ms()
    present = {d["_id"] async for d in db.attachments.find({"_id": {"$in": list(wanted)}}, {"_id": 1})}
    if present:  # named again: kept a body retention from now
        bumped = await db.attachments.update_many({"_id": {"$in": list(present)}}, {"$max": {"used_ms": used}})
        if bumped.matched_count < len(present):  # the retention job took one meanwhile: store it again
            present = {d["_id"] async for d in db.attachments.find({"_id": {"$in": list(present)}}, {"_id": 1})}
    now = now_iso()
    await insert_all_new(db.attachments, [
        {"_id": key, "workspace_id": workspace_id, "sha256": f.sha256, "size": f.size, "content": Binary(f.data),
         "created_at": now, "used_ms": used}
        for key, f in wanted.items() if key not in present])


async def expired(db: AsyncDatabase, used_before_ms: int, limit: int) -> int:
    """Up to `limit` files no message accepted since `used_before_ms` names, deleted (an
    integer range over `used_ms`, its own index); how many."""
    gone = [d["_id"] for d in await db.attachments.find({"used_ms": {"$lt": used_before_ms}}, {"_id": 1},
                                                        limit=limit).to_list()]
    if gone:
        await db.attachments.delete_many({"_id": {"$in": gone}, "used_ms": {"$lt": used_before_ms}})
    return len(gone)


INDEXES = {"attachments": [IndexModel([("used_ms", ASCENDING)], name="used_ms")]}


async def load(db: AsyncDatabase, keys: list[str]) -> dict[str, bytes]:
    """The stored bytes by key (a key with nothing stored is absent)."""
    if not keys:
        return {}
    return {d["_id"]: bytes(d["content"]) async for d in db.attachments.find({"_id": {"$in": list(set(keys))}},
                                                                             {"content": 1})}
