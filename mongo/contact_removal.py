"""Delete-all (soft) and its restore. A delete-all marks every live contact of the
workspace `deleted` under one `deletion_id` (see the document shape in mongo/contacts.py)
and logs it in the activity log with the end of its restore window; a restore brings back
the contacts of one delete-all, except those whose address was added again meanwhile
(the unique index refuses them; they stay deleted and are reported)."""

from __future__ import annotations

import datetime as dt

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from pipelines.core.clock import iso, ms_of, now_iso, now_ms, utcnow
from pipelines.core.ids import new_uuid
from pipelines.messages.delivery_status import NEVER_MS

from . import activity, versions
from .contacts import live

RESTORE_WINDOW = dt.timedelta(days=30)
DELETE_ALL = "contacts.delete_all"
RESTORE = "contacts.restore"
_RESTORE_CHUNK = 1000


async def delete_all(db: AsyncDatabase, workspace_id: str, key_id: str | None) -> dict:
    """Soft-delete every live contact; the activity entry (details: deletion_id, count,
    restorable_until)."""
    deletion_id = new_uuid()
    now = utcnow()
    result = await db.contacts.update_many(
        live(workspace_id),
        versions.bump({"$set": {"deleted": True, "deleted_at": iso(now), "deletion_id": deletion_id,
                                "updated_at": iso(now)}}))
    until = iso(now + RESTORE_WINDOW)
    # `purge_ms`: when the purge is due, as the integer the scheduler ranges over (purge_unrestorable)
    return await activity.record(db, workspace_id, DELETE_ALL, key_id, {
        "deletion_id": deletion_id, "count": result.modified_count, "restorable_until": until, "purged": False},
        fields={"purge_ms": ms_of(until)})


async def find_deletion(db: AsyncDatabase, workspace_id: str, deletion_id: str | None) -> dict | None:
    """The delete-all entry named, or the workspace's latest one."""
    if deletion_id is None:
        return await activity.latest(db, workspace_id, DELETE_ALL)
    return await activity.find_detail(db, workspace_id, DELETE_ALL, "deletion_id", deletion_id)


def restorable(entry: dict) -> bool:
    return now_iso() < entry["details"]["restorable_until"]


async def restore(db: AsyncDatabase, workspace_id: str, entry: dict, key_id: str | None) -> dict:
    """Bring back the contacts of the delete-all `entry`; the activity entry of the restore
    (details: deletion_id, restored, skipped: addresses now held by a newer contact)."""
    deletion_id = entry["details"]["deletion_id"]
    docs = await db.contacts.find({"workspace_id": workspace_id, "deletion_id": deletion_id},
                                  {"_id": 1, "email": 1}).to_list()
    restored = 0
    skipped: list[str] = []
    now = now_iso()
    for start in range(0, len(docs), _RESTORE_CHUNK):
        chunk = docs[start:start + _RESTORE_CHUNK]
        ops = [UpdateOne({"_id": d["_id"], "deletion_id": deletion_id},
                         versions.bump({"$set": {"deleted": False, "deleted_at": None, "deletion_id": "",
                                                 "updated_at": now}}))
               for d in chunk]
        try:
            result = await db.contacts.bulk_write(ops, ordered=False)
            restored += result.modified_count
        except BulkWriteError as error:
            failed = [e for e in error.details.get("writeErrors", [])]
            if any(e.get("code") != 11000 for e in failed):
                raise
            restored += error.details.get("nModified", 0)
            skipped.extend(chunk[e["index"]]["email"] for e in failed)
    return await activity.record(db, workspace_id, RESTORE, key_id, {
        "deletion_id": deletion_id, "restored": restored, "skipped": skipped})


async def purge_unrestorable(db: AsyncDatabase) -> int:
    """A scheduler job (ops/store_jobs.py): permanently delete the contacts of delete-alls whose restore window
    has ended (found through the small activity log, not by scanning contacts)."""
    due = await db.activity.find({"purge_ms": {"$lt": now_ms()}, "action": DELETE_ALL}, limit=100).to_list()
    purged = 0
    for entry in due:
        result = await db.contacts.delete_many({"workspace_id": entry["workspace_id"],
                                                "deletion_id": entry["details"]["deletion_id"]})
        purged += result.deleted_count
        # the whole object: a dotted boolean $set comes back as 0/1 from the embedded store
        await db.activity.update_one({"_id": entry["_id"]},
                                     {"$set": {"details": {**entry["details"], "purged": True},
                                               "purge_ms": NEVER_MS}})
    return purged

