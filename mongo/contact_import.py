"""Contacts in bulk: upsert a row group of CSV rows (ROW_GROUP_ROWS of a file, see
pipelines/workflows/bulk_import.py) by address in a few bulk commands (never one request
per row), and the job documents of API imports and exports.

A row group, new addresses (the common case, and what bench/contact_import times): one
read of the suppression list by `_id`, one pledge of the group's events (mongo/outbox:
one document), one `insert_many` of the new contacts (natural `_id`s, plain: they carry no
events, so nothing rewrites them after), one insert of their events into the outbox
(contact.created, and list.member_added + contact.subscribed when a list was given, as
`contacts.insert` records them), and the pledge dropped. Addresses the unique index
reports taken: one `find` of their live contacts and one `bulk_write` of updates by `_id`
(contact.updated with the fields that changed, carried and relayed). The embedded store
answers a lookup by address (`$in` on `email_key`) by reading every contact of the
workspace, so only taken addresses are looked up; and it scans for updates filtered on
anything but `_id`, so nothing here updates by address.

Existing contacts: given names are set, attributes merged (a whole object), the list and
tag added; `subscribed` is left alone. A suppressed address stays suppressed: a new
contact with it is created unsubscribed, and the suppression is never removed.

Job documents (`contact_jobs`): `_id`, `workspace_id`, `kind` (`import`/`export`),
`status` (`queued` → `running` → `completed` | `failed`), counters, `errors` (each
`{line, message, email}`, at most MAX_STORED_ERRORS kept; `error_count` counts all).
An import's file waits in `contact_import_files` in chunks until the job has run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field

from pymongo import ASCENDING, DESCENDING, IndexModel, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from pipelines import views
from pipelines.audience.contact_csv import ContactRow
from pipelines.core.clock import now_iso
from pipelines.core.ids import new_uuid

from . import contacts, outbox, suppressions, versions
from .documents import DUPLICATE_KEY
from .lists import joining_events

INDEXES: dict[str, list] = {
    "contact_jobs": [IndexModel([("workspace_id", ASCENDING), ("created_at", DESCENDING)], name="ws_created")],
}

FILE_CHUNK_BYTES = 1024 * 1024
MAX_STORED_ERRORS = 1000
IMPORT_REASON = "import"  # the `reason` of the contact.subscribed an import's list join records


@dataclass
class RowGroupOutcome:
    """What a row group did, counted per address; an address an earlier row group of the
    same file wrote (`repeated`) is written again (its later cells win) but counted by the
    caller as a duplicate, never here, so a file's counts add up to its rows.

    `recording`: the events of the contacts it created, still being recorded (their
    pledge redeemed) when the caller let it go on (`write_row_group(settle_later=True)`):
    the caller awaits it, and may write the next row group's contacts meanwhile."""
    repeated: set[str] = field(default_factory=set)
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    suppressed: int = 0
    recording: Awaitable[None] | None = None

    def count(self, name: str, row: ContactRow) -> None:
        if row.email.lower() not in self.repeated:
            setattr(self, name, getattr(self, name) + 1)


@dataclass
class PlannedRowGroup:
    """A row group ready to write, built without the store (so the next one is planned
    while this one is written): one row per address, each as the new contact it becomes
    if its address is free, with the events that creation records."""
    rows: list[ContactRow]
    docs: list[dict]                  # the new contact of each row, in the same order
    events_of: dict[str, list[dict]]  # a new contact's `_id` → its events
    suppressed: set[str] | None = None  # the suppressed addresses among them, once looked up
    owed_json: str | None = None      # `events_of` as its pledge stores it (made with the plan, off the loop)


def _merge_duplicates(rows: list[ContactRow]) -> list[ContactRow]:
    """Rows of one address within the row group become one (later cells win): the file's
    order is kept, nothing is dropped."""
    merged: dict[str, ContactRow] = {}
    for row in rows:
        key = row.email.lower()
        if key in merged:
            first = merged[key]
            first.fields.update(row.fields)
            first.attributes.update(row.attributes)
        else:
            merged[key] = ContactRow(row.line, row.email, dict(row.fields), dict(row.attributes))
    return list(merged.values())


async def ensure_unique_addresses(db: AsyncDatabase) -> None:
    """The contacts' indexes, the unique one on addresses first among them: an import tells
    new addresses from taken ones by it, and a command-line import may be the first process
    to meet a store that no front or worker has prepared yet (createIndexes is a no-op once
    they exist)."""
    await db.contacts.create_indexes(contacts.INDEXES["contacts"])


def plan_row_group(workspace_id: str, rows: list[ContactRow], *, list_doc: dict | None = None,
                   tag_id: str | None = None) -> PlannedRowGroup:
    merged = _merge_duplicates(rows)
    group = PlannedRowGroup(merged, [], {})
    group.docs = [_plan_new(group, workspace_id, row, list_doc, tag_id, suppressed=False) for row in merged]
    group.owed_json = json.dumps(group.events_of)
    return group


def _plan_new(group: PlannedRowGroup, workspace_id: str, row: ContactRow, list_doc: dict | None,
              tag_id: str | None, *, suppressed: bool) -> dict:
    """The new contact of `row` and its events (contact.created; list.member_added and
    contact.subscribed when a list is given, as `contacts.insert` records them)."""
    doc = contacts.new_document(
        workspace_id, email=row.email, first_name=row.fields.get("first_name"),
        last_name=row.fields.get("last_name"), attributes=row.attributes,
        subscribed=row.fields.get("subscribed", True) and not suppressed,
        lists=[list_doc["_id"]] if list_doc else [])
    if tag_id:
        doc["tags"] = [tag_id]
    events = [outbox.event_document(workspace_id, "contact.created", {"contact": views.contact(doc)})]
    if list_doc:
        events.extend(joining_events(list_doc, doc, IMPORT_REASON))
    group.events_of[doc["_id"]] = events
    return doc


# A row's address taken at insert and gone by the lookup (deleted meanwhile) is tried as new again.
_INSERT_ROUNDS = 3


async def write_row_group(db: AsyncDatabase, workspace_id: str, group: PlannedRowGroup, *,
                          list_doc: dict | None = None, tag_id: str | None = None,
                          repeated: set[str] | None = None, settle_later: bool = False) -> RowGroupOutcome:
    """Write a planned row group: new addresses inserted in one insert_many
    (their events pledged in one write and recorded in one more), and only the addresses
    the unique index reports taken looked up, in one read, and updated in one bulk_write.
    Inserting first spares a new address the lookup, which the embedded store answers by
    reading every contact of the workspace (`$in` on a field other than `_id`).

    `settle_later`: the first insert's events are left recording (`outcome.recording`,
    for the caller to await) so that the next row group's contacts can be written
    meanwhile: the store then always has a command waiting instead of idling while this
    process builds the next one. The pledge keeps them safe in between, as it does here."""
    outcome = RowGroupOutcome(repeated=repeated or set())
    if group.suppressed is None:
        await withhold_suppressed(db, workspace_id, group, list_doc=list_doc, tag_id=tag_id)
    assert group.suppressed is not None  # (looked up just above)
    for row in group.rows:
        if row.email.lower() in group.suppressed:
            outcome.count("suppressed", row)
    try:
        await _write_rounds(db, workspace_id, group, outcome, list_doc, tag_id, settle_later)
    except BaseException:
        if isinstance(outcome.recording, asyncio.Future):  # left to finish, its outcome retrieved
            outcome.recording.add_done_callback(lambda f: f.cancelled() or f.exception())
        raise
    return outcome


async def _write_rounds(db: AsyncDatabase, workspace_id: str, group: PlannedRowGroup, outcome: RowGroupOutcome,
                        list_doc: dict | None, tag_id: str | None, settle_later: bool) -> None:
    assert group.suppressed is not None  # (looked up by write_row_group)
    rows, docs = group.rows, group.docs
    for round_ in range(_INSERT_ROUNDS):
        taken = await _insert_new(db, group, rows, docs, outcome, settle_later=settle_later and round_ == 0)
        existing = await contacts.find_by_emails(db, workspace_id, [r.email for r in taken]) if taken else {}
        await _update_existing(db, workspace_id, [r for r in taken if r.email.lower() in existing], existing,
                               list_doc, tag_id, outcome)
        rows = [r for r in taken if r.email.lower() not in existing]
        if not rows:
            return
        docs = [_plan_new(group, workspace_id, r, list_doc, tag_id, suppressed=r.email.lower() in group.suppressed)
                for r in rows]
    raise RuntimeError(f"{len(rows)} addresses kept being taken and freed; row group not fully imported")


async def withhold_suppressed(db: AsyncDatabase, workspace_id: str, group: PlannedRowGroup, *,
                              list_doc: dict | None = None, tag_id: str | None = None) -> None:
    """A suppressed address stays suppressed: its new contact is planned again, unsubscribed.
    (A read of its own: the import runs it for the next row group while this one is written.)"""
    group.suppressed = {e.lower() for e in await suppressions.suppressed_among(db, workspace_id,
                                                                              [r.email for r in group.rows])}
    for n, row in enumerate(group.rows):
        if row.email.lower() in group.suppressed:
            del group.events_of[group.docs[n]["_id"]]
            group.docs[n] = _plan_new(group, workspace_id, row, list_doc, tag_id, suppressed=True)
            group.owed_json = None  # planned again: its pledge is written anew


async def _insert_new(db: AsyncDatabase, group: PlannedRowGroup, rows: list[ContactRow], docs: list[dict],
                      outcome: RowGroupOutcome, *, settle_later: bool = False) -> list[ContactRow]:
    """Insert `docs` (plain: their events pledged, not carried); the rows whose address a
    live contact already holds. With `settle_later`, their events are left recording in
    `outcome.recording`."""
    if not docs:
        return []
    whole = docs is group.docs and group.owed_json is not None
    pledge_id = await outbox.pledge(db, "contacts", {d["_id"]: group.events_of[d["_id"]] for d in docs},
                                    owed_json=group.owed_json if whole else None)
    failed: set[int] = set()
    try:
        await db.contacts.insert_many(docs, ordered=False)
    except BulkWriteError as error:
        for problem in error.details.get("writeErrors", []):
            if problem.get("code") != DUPLICATE_KEY:
                raise
            failed.add(problem["index"])
    inserted = [n for n in range(len(docs)) if n not in failed]
    for n in inserted:
        outcome.count("created", rows[n])
    recording = outbox.redeem(db, pledge_id, [e for n in inserted for e in group.events_of[docs[n]["_id"]]])
    if settle_later:
        outcome.recording = asyncio.ensure_future(recording)
    else:
        await recording
    return [rows[n] for n in sorted(failed)]


async def _update_existing(db, workspace_id, rows, existing, list_doc, tag_id, outcome) -> None:
    """One bulk_write by `_id` for the rows that change their contact, carrying their
    events (contact.updated, the list's joining events) and relayed after."""
    writes, written_ids = [], []
    event_ids: set[str] = set()
    now = now_iso()
    for row in rows:
        current = existing[row.email.lower()]
        planned = _row_update(workspace_id, row, current, list_doc, tag_id, now)
        if planned is None:
            outcome.count("unchanged", row)
            continue
        update, events = planned
        event_ids.update(e["_id"] for e in events)
        update = versions.bump(update)  # every write to a contact adds one (mongo/versions.py)
        writes.append(UpdateOne({"_id": current["_id"]}, outbox.carrying(update, events) if events else update))
        written_ids.append(current["_id"])
        outcome.count("updated", row)
    if writes:
        await db.contacts.bulk_write(writes, ordered=False)
        if event_ids:
            await outbox.relay(db, "contacts", written_ids, event_ids)


def _row_update(workspace_id: str, row, current: dict, list_doc: dict | None, tag_id: str | None,
                now: str) -> tuple[dict, list[dict]] | None:
    """The update an imported row makes to the contact it matches, and the events it
    carries; None when it changes nothing (the subscription flag is never imported over)."""
    changes = {k: v for k, v in row.fields.items() if k != "subscribed" and current.get(k) != v}
    merged = {**(current.get("attributes") or {}), **row.attributes}
    if merged != (current.get("attributes") or {}):
        changes["attributes"] = merged
    joins = list_doc is not None and list_doc["_id"] not in (current.get("lists") or [])
    tags = tag_id is not None and tag_id not in (current.get("tags") or [])
    if not changes and not joins and not tags:
        return None
    after = {**current, **changes, "updated_at": now}
    update: dict = {"$set": {**changes, "updated_at": now}}
    events = []
    if changes:
        events.append(outbox.event_document(workspace_id, "contact.updated",
                                            {"contact": views.contact(after), "changed": sorted(changes)}))
    if joins and list_doc is not None:  # (joins names a list)
        update["$addToSet"] = {"lists": list_doc["_id"]}
        events.extend(joining_events(list_doc, after, IMPORT_REASON))
    if tags:
        update.setdefault("$addToSet", {})["tags"] = tag_id
    return update, events


async def export_attribute_names(db: AsyncDatabase, workspace_id: str, condition: dict | None) -> list[str]:
    """Every attribute name among the selected contacts: a first pass reading only
    `attributes`, so the header is known before the rows stream."""
    names: set[str] = set()
    query = contacts.live(workspace_id, condition) if condition else contacts.live(workspace_id)
    async for doc in db.contacts.find(query, {"attributes": 1}, batch_size=EXPORT_FETCH_DOCS):
        names.update((doc.get("attributes") or {}).keys())
    return sorted(names)


EXPORT_FETCH_DOCS = 1000


async def export_contacts(db: AsyncDatabase, workspace_id: str, condition: dict | None) -> AsyncIterator[dict]:
    """The selected live contacts in `_id` order through one cursor fetching EXPORT_FETCH_DOCS
    documents at a time (never the whole audience in memory). One cursor, not pages from
    the last `_id` seen: the embedded store answers each `_id > x` page with a scan, so
    pages cost O(n²) where the cursor's fetches cost O(n)."""
    query = contacts.live(workspace_id, condition) if condition else contacts.live(workspace_id)
    async for doc in db.contacts.find(query, sort=[("_id", ASCENDING)], batch_size=EXPORT_FETCH_DOCS):
        yield doc


# -- jobs -------------------------------------------------------------------------------

async def create_job(db: AsyncDatabase, workspace_id: str, kind: str, status: str = "queued", **fields) -> dict:
    doc = {"_id": new_uuid(), "workspace_id": workspace_id, "kind": kind, "status": status,
           "created_at": now_iso(), "started_at": None, "finished_at": None, **fields}
    await db.contact_jobs.insert_one(doc)
    return doc


async def get_job(db: AsyncDatabase, workspace_id: str | None, job_id: str) -> dict | None:
    doc = await db.contact_jobs.find_one({"_id": job_id})
    if doc is None or (workspace_id is not None and doc["workspace_id"] != workspace_id):
        return None
    return doc


async def claim_job(db: AsyncDatabase, job_id: str) -> dict | None:
    """queued → running, once (a redelivered actor message finds it running or done)."""
    return await db.contact_jobs.find_one_and_update(
        {"_id": job_id, "status": "queued"}, {"$set": {"status": "running", "started_at": now_iso()}},
        return_document=True)


async def update_job(db: AsyncDatabase, job_id: str, changes: dict) -> None:
    await db.contact_jobs.update_one({"_id": job_id}, {"$set": changes})


async def store_file(db: AsyncDatabase, job_id: str, data: bytes) -> int:
    chunks = [{"_id": f"{job_id}:{n}", "job_id": job_id, "n": n, "data": data[start:start + FILE_CHUNK_BYTES]}
              for n, start in enumerate(range(0, len(data), FILE_CHUNK_BYTES))]
    if chunks:
        await db.contact_import_files.insert_many(chunks)
    return len(chunks)


async def load_file(db: AsyncDatabase, job_id: str, chunk_count: int) -> bytes:
    docs = await db.contact_import_files.find(
        {"_id": {"$in": [f"{job_id}:{n}" for n in range(chunk_count)]}}).to_list()
    return b"".join(bytes(d["data"]) for d in sorted(docs, key=lambda d: d["n"]))


async def drop_file(db: AsyncDatabase, job_id: str, chunk_count: int) -> None:
    await db.contact_import_files.delete_many({"_id": {"$in": [f"{job_id}:{n}" for n in range(chunk_count)]}})
