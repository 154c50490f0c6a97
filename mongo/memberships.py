"""Assigning contacts to tags and static lists: both are an id kept in an array field of
the contact (`tags`, `lists`), added with `$addToSet` and removed with `$pull`.

Each change is guarded on the array's current content, so a repeat (or two callers at
once) changes a contact once. A change that has an event (list membership) carries it in
the same guarded write, so the event exists exactly when the change happened, and the
contacts whose event was written are exactly the ones reported as changed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso

from . import outbox, versions
from .contacts import existing
from .documents import delete_owned

FIELDS = ("tags", "lists")


@dataclasses.dataclass
class Outcome:
    changed: list[dict]       # the contacts changed ({_id, email})
    unchanged: list[str]      # ids that already were (or were not) members
    not_found: list[str]      # ids that are not live contacts of the workspace


EventFor = Callable[[dict], list[dict]]  # a changed contact (as it is now, the change made) → its outbox events


async def _apply(db: AsyncDatabase, workspace_id: str, field: str, ref_id: str,
                 contact_ids: list[str], adding: bool, event_for: EventFor | None = None) -> Outcome:
    assert field in FIELDS
    wanted = list(dict.fromkeys(contact_ids))
    docs = await existing(db, workspace_id, wanted, fields=None if event_for else ("_id", "email", field))
    changed = [d for d in docs if (ref_id in d.get(field, [])) != adding]
    now = now_iso()
    events = {d["_id"]: event_for({**d, "updated_at": now}) for d in changed} if event_for else {}
    ops = [_membership_write(d["_id"], field, ref_id, adding, now, events.get(d["_id"])) for d in changed]
    if ops:
        await db.contacts.bulk_write(ops, ordered=False)
    if events:
        changed = await _relayed(db, changed, events)
    return _outcome(wanted, {d["_id"] for d in docs}, changed)


def _membership_write(contact_id: str, field: str, ref_id: str, adding: bool, now: str,
                      events: list[dict] | None) -> UpdateOne:
    """Add `ref_id` to (or pull it from) the contact's `field`, guarded on it not being
    there (being there) yet, carrying its `events`."""
    guard: dict
    update: dict
    if adding:
        guard, update = {field: {"$nin": [ref_id]}}, {"$addToSet": {field: ref_id}, "$set": {"updated_at": now}}
    else:
        guard, update = {field: ref_id}, {"$pull": {field: ref_id}, "$set": {"updated_at": now}}
    if events:
        update = outbox.carrying(update, events)
    return UpdateOne({"_id": contact_id, **guard}, versions.bump(update))


async def _relayed(db: AsyncDatabase, changed: list[dict], events: dict[str, list[dict]]) -> list[dict]:
    """The contacts whose change was ours: what a concurrent caller changed first carries
    no event of ours, so it is not ours to report."""
    written = {e["_id"] for e in await outbox.relay(db, "contacts", list(events),
                                                     {e["_id"] for mine in events.values() for e in mine})}
    return [d for d in changed if events[d["_id"]][0]["_id"] in written]


def _outcome(wanted: list[str], found: set[str], changed: list[dict]) -> Outcome:
    changed_ids = {d["_id"] for d in changed}
    return Outcome(changed=[{"_id": d["_id"], "email": d["email"]} for d in changed],
                   unchanged=[i for i in wanted if i in found and i not in changed_ids],
                   not_found=[i for i in wanted if i not in found])


async def add(db: AsyncDatabase, workspace_id: str, field: str, ref_id: str,
              contact_ids: list[str], event_for: EventFor | None = None) -> Outcome:
    return await _apply(db, workspace_id, field, ref_id, contact_ids, adding=True, event_for=event_for)


async def remove(db: AsyncDatabase, workspace_id: str, field: str, ref_id: str,
                 contact_ids: list[str], event_for: EventFor | None = None) -> Outcome:
    return await _apply(db, workspace_id, field, ref_id, contact_ids, adding=False, event_for=event_for)


async def delete_with_memberships(db: AsyncDatabase, field: str, workspace_id: str, ref_id: str) -> bool:
    """Delete the tag or list `ref_id` (kept in the collection named `field`) and pull it
    from every contact; its contacts stay."""
    if not await delete_owned(db[field], workspace_id, ref_id):
        return False
    await drop_everywhere(db, workspace_id, field, ref_id)
    return True


async def drop_everywhere(db: AsyncDatabase, workspace_id: str, field: str, ref_id: str) -> int:
    """Cascade of a deleted tag or list: pulled from every contact, soft-deleted ones too
    (so a restore brings back no dangling id)."""
    assert field in FIELDS
    result = await db.contacts.update_many({"workspace_id": workspace_id, field: ref_id},
                                           versions.bump({"$pull": {field: ref_id}}))
    return result.modified_count


async def counts(db: AsyncDatabase, workspace_id: str, field: str, ref_ids: list[str]) -> dict[str, int]:
    """Live contacts per tag or static list id, in one index-backed aggregation."""
    assert field in FIELDS
    if not ref_ids:
        return {}
    pipeline: list[dict] = [
        {"$match": {"workspace_id": workspace_id, field: {"$in": list(ref_ids)}, "deleted": False}},
        {"$unwind": f"${field}"},
        {"$match": {field: {"$in": list(ref_ids)}}},
        {"$group": {"_id": f"${field}", "n": {"$sum": 1}}},
    ]
    rows = await (await db.contacts.aggregate(pipeline)).to_list()
    found = {row["_id"]: row["n"] for row in rows}
    return {ref: found.get(ref, 0) for ref in ref_ids}
