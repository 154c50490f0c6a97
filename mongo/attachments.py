"""`attachments`: the bytes of files sent with transactional email, one document a file
per workspace and content (`_id` = `<workspace id>:<sha256>`), apart from the messages
that send them. A message keeps only a reference (filename, type, content id, sha256,
size: pipelines/messages/attachments.AttachmentFile.reference), so its document stays
small on the hot path (the send step reads messages by the hundred) and far from the
store's 16 MB document limit, and one file sent to a thousand recipients of a batch is
stored once. Files are written before the messages that name them, so a render never
finds a message whose bytes are not there yet.

Nothing here deletes: files are removed by the message retention job, once no stored
message names them (docs/email.md, Attachments)."""

from __future__ import annotations

from bson import Binary
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso
from pipelines.messages.attachments import AttachmentFile, store_key

from .documents import insert_all_new


async def store(db: AsyncDatabase, workspace_id: str, files: list[AttachmentFile]) -> None:
    """Each file not stored yet, once (a file already there is not written again: in the
    embedded store a rewrite of a 10 MB document costs most of a second)."""
    wanted = {store_key(workspace_id, f.sha256): f for f in files}
    if not wanted:
        return
    present = {d["_id"] async for d in db.attachments.find({"_id": {"$in": list(wanted)}}, {"_id": 1})}
    now = now_iso()
    await insert_all_new(db.attachments, [
        {"_id": key, "workspace_id": workspace_id, "sha256": f.sha256, "size": f.size, "content": Binary(f.data),
         "created_at": now}
        for key, f in wanted.items() if key not in present])


async def load(db: AsyncDatabase, keys: list[str]) -> dict[str, bytes]:
    """The stored bytes by key (a key with nothing stored is absent)."""
    if not keys:
        return {}
    return {d["_id"]: bytes(d["content"]) async for d in db.attachments.find({"_id": {"$in": list(set(keys))}},
                                                                             {"content": 1})}
