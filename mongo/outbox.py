"""The outbox: every event the spec lists is recorded here as part of the step that made
the state change, and delivered to webhook subscriptions from here.

Without multi-document transactions (and the embedded store's are unsafe), an event can
only be written *with* its change when it travels in the document that changes: the API's
audience and conversion writes put their events into the changed document itself
(`outbox_pending`), in the same single-document write as the change (`carrying`,
`inserted_with`). `relay` then copies them into this collection and takes them out of the
document; a process that dies in between leaves them there, and the scheduler's
`relay_stranded` finishes the job. So a stored change always yields its event, once.

Actor steps record events after their guarded transition with a deterministic `event_id`:
a redelivered actor message records the event once."""

from __future__ import annotations

import json

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from pipelines.automations.triggers import CONSUMED_EVENTS
from pipelines.core.clock import ms_in, ms_of, now_iso, now_ms
from pipelines.core.ids import new_uuid
from pipelines.messages.delivery_status import NEVER_MS

from . import webhooks
from .documents import insert_all_new


def event_document(workspace_id: str, event: str, data: dict, event_id: str | None = None) -> dict:
    return {
        "_id": event_id or new_uuid(),
        "workspace_id": workspace_id,
        "event": event,
        "data": data,
        "timestamp": now_iso(),
        "dispatched": False,
        # automations read the events that can start a run or end a wait, once
        # (pipelines/workflows/automation_triggers.py)
        "automations_pending": event in CONSUMED_EVENTS,
    }


# Fields of a document that carries events (see the module docstring).
PENDING = "outbox_pending"              # the events not yet relayed
# When the newest was written, epoch ms (an integer: the stranded sweep ranges over it, and
# a date-like string in a filter makes the embedded store read the whole collection); 0 when none wait.
PENDING_AT = "outbox_pending_ms"
PENDING_TOKEN = "outbox_pending_token"  # the newest event's id: guards clearing the marker
CARRIER_FIELDS = (PENDING, PENDING_AT, PENDING_TOKEN)
CARRIERS = ("contacts", "conversions", "automation_runs", "form_signups")  # collections whose writes carry events
STRANDED_AFTER_SECONDS = 30             # a relay this late is taken to have died


def no_events() -> dict:
    """The carrier fields of a document with nothing pending. Every carrier document is
    written with them: the embedded store cannot `$addToSet` onto a missing array."""
    return {PENDING: [], PENDING_AT: 0, PENDING_TOKEN: ""}


def inserted_with(doc: dict, events: list[dict]) -> dict:
    """A new document carrying `events`."""
    if not events:
        return {**doc, **no_events()}
    return {**doc, PENDING: list(events), PENDING_AT: ms_of(events[-1]["timestamp"]), PENDING_TOKEN: events[-1]["_id"]}


def carrying(update: dict, events: list[dict]) -> dict:
    """`update` (its operators) plus putting `events` into the document, in the same write."""
    out = {op: dict(fields) for op, fields in update.items()}
    out.setdefault("$set", {}).update({PENDING_AT: ms_of(events[-1]["timestamp"]), PENDING_TOKEN: events[-1]["_id"]})
    out.setdefault("$addToSet", {})[PENDING] = {"$each": list(events)}
    return out


async def relay(db: AsyncDatabase, collection: str, doc_ids: list[str],
                event_ids: set[str] | None = None) -> list[dict]:
    """Copy the events the documents carry into the outbox (only `event_ids`, when given:
    the ones this caller wrote; a guarded write that did not match carries none) and take
    them out. Returns the events relayed. One read and one bulk write in the common case."""
    docs = await db[collection].find({"_id": {"$in": list(doc_ids)}},
                                     {PENDING: 1, PENDING_TOKEN: 1}).to_list()
    moves, stale = [], []
    for doc in docs:
        pending = doc.get(PENDING) or []
        mine = [e for e in pending if event_ids is None or e["_id"] in event_ids]
        if mine:
            moves.append((doc, mine, len(mine) == len(pending)))
        elif not pending and doc.get(PENDING_TOKEN):
            stale.append(doc)  # interleaved relays took every event but left the marker
    events = [e for _, mine, _ in moves for e in mine]
    if events:
        await record_many(db, events)
    pulls = [UpdateOne({"_id": d["_id"]}, {"$pull": {PENDING: {"_id": {"$in": [e["_id"] for e in mine]}}}})
             for d, mine, _ in moves]
    # The marker goes with the last events, unless a later write (a new token) added more.
    clears = [UpdateOne({"_id": d["_id"], PENDING_TOKEN: d[PENDING_TOKEN]},
                        {"$set": {PENDING_AT: 0, PENDING_TOKEN: ""}})
              for d in [d for d, _, everything in moves if everything] + stale]
    if pulls or clears:
        await db[collection].bulk_write(pulls + clears, ordered=True)
    return events


async def relay_inserted(db: AsyncDatabase, collection: str, docs: list[dict]) -> None:
    """`relay` for documents this caller has just inserted (`inserted_with`), in bulk: the
    events are in hand, so no read; and while the token is still the one we wrote, no
    later write added events, so the carrier is emptied in one `$set` instead of a pull
    and a clear. Where a later write did add some, our events stay behind too and a later
    relay records them again, which the outbox ignores by `_id`."""
    carried = [d for d in docs if d.get(PENDING)]
    if not carried:
        return
    await record_many(db, [e for d in carried for e in d[PENDING]])
    await db[collection].bulk_write([UpdateOne({"_id": d["_id"], PENDING_TOKEN: d[PENDING_TOKEN]},
                                               {"$set": no_events()}) for d in carried], ordered=False)


async def relay_stranded(db: AsyncDatabase, *, limit: int = 500) -> int:
    """Events a dead process left in their documents or pledges, relayed (a scheduler job,
    ops/store_jobs.py)."""
    cutoff = ms_in(-STRANDED_AFTER_SECONDS)
    relayed = 0
    for collection in CARRIERS:
        docs = await db[collection].find({PENDING_AT: {"$gt": 0, "$lt": cutoff}}, {"_id": 1},
                                         limit=limit).to_list()
        if docs:
            relayed += len(await relay(db, collection, [d["_id"] for d in docs]))
    for stranded in await db[PLEDGES].find({PENDING_AT: {"$gt": 0, "$lt": cutoff}}, {"_id": 1}).to_list():
        relayed += await _redeem_stranded(db, stranded["_id"])
    return relayed


# -- pledges: the events of many new documents in one write ---------------------------------
#
# Carrying an event inside each new document costs a second write per document to take it
# out again (the relay). A bulk insert of new documents (a contact import's row group)
# instead pledges all their events in ONE document first, inserts the documents plain,
# records the events of the documents that went in, and drops the pledge. A writer that
# dies in between leaves the pledge: the sweep records the events of those documents that
# exist (a fresh `_id` exists only if that insert happened) and drops the rest, whose
# documents were never written. Either way each stored document's events are recorded once.
# The same serves a bulk *replacement* of documents whose change an event reports (the
# automation engine's moves, mongo/automation_runs.transition_many): `owed_when` names, per
# event type, what the document must hold for that event to be owed (flow.completed: the
# run is completed), so the sweep records only the events whose change is there.
PLEDGES = "outbox_pledges"


async def pledge(db: AsyncDatabase, collection: str, events_of: dict[str, list[dict]], *,
                 owed_json: str | None = None, owed_when: dict[str, dict] | None = None) -> str:
    """Pledge `events_of` (document `_id` → its events) before those documents are
    inserted into (or replaced in) `collection`; the pledge's id, for `redeem`.
    `owed_json`: `events_of` as JSON already (made off the event loop by a caller that
    could). `owed_when`: event type → the flat fields a document must hold for its event
    of that type to be owed (without: its existing is enough)."""
    pledge_id = new_uuid()
    # One JSON string, not a nested array: the embedded store walks every nested value of a
    # document it stores, and 1,000 events as documents cost it ~6x a string of them.
    await db[PLEDGES].insert_one({"_id": pledge_id, "collection": collection, PENDING_AT: now_ms(),
                                  "owed": owed_json if owed_json is not None else json.dumps(events_of),
                                  "owed_when": json.dumps(owed_when or {})})
    return pledge_id


async def redeem(db: AsyncDatabase, pledge_id: str, events: list[dict]) -> None:
    """Record `events` (those of the pledged documents that were inserted) and drop the pledge."""
    await record_many(db, events)
    await db[PLEDGES].delete_one({"_id": pledge_id})


async def _redeem_stranded(db: AsyncDatabase, pledge_id: str) -> int:
    doc = await db[PLEDGES].find_one({"_id": pledge_id})
    if doc is None:  # its writer redeemed it meanwhile
        return 0
    owed = json.loads(doc["owed"])
    when: dict[str, dict] = json.loads(doc.get("owed_when") or "{}")
    fields = {name: 1 for condition in when.values() for name in condition}
    written = await db[doc["collection"]].find({"_id": {"$in": list(owed)}}, {"_id": 1, **fields}).to_list()
    events = [e for d in written for e in owed[d["_id"]]
              if all(d.get(name) == value for name, value in when.get(e["event"], {}).items())]
    await redeem(db, pledge_id, events)
    return len(events)


# The two readers' queues, as integers in indexes of their own: the event's time (epoch ms)
# while it waits for the webhook fan-out (`dispatch_ms`) or for automations
# (`automations_ms`), NEVER_MS once read. The embedded store answered the finds on the
# booleans (`dispatched: false`, `automations_pending: true`) by reading every event
# (1.1 s a tick at 20,000 events); a range over one integer comes from its index.
DISPATCH_MS, AUTOMATIONS_MS = "dispatch_ms", "automations_ms"


def _queued(doc: dict) -> dict:
    """An event as stored: with its place in each reader's queue."""
    at = ms_of(doc["timestamp"])
    return {**doc, DISPATCH_MS: NEVER_MS if doc.get("dispatched") else at,
            AUTOMATIONS_MS: at if doc.get("automations_pending") else NEVER_MS}


async def record(db: AsyncDatabase, workspace_id: str, event: str, data: dict,
                 *, event_id: str | None = None) -> str:
    doc = event_document(workspace_id, event, data, event_id)
    try:
        await db.outbox.insert_one(_queued(doc))
    except DuplicateKeyError:
        pass
    return doc["_id"]


async def record_many(db: AsyncDatabase, docs: list[dict], *, only_subscribed: bool = False) -> None:
    """Insert events (a redelivered actor's duplicates are ignored by `_id`).

    `only_subscribed` drops events no active subscription of their workspace listens to.
    The send path uses it for the per-message flood (`email.sent`, `email.delivered`):
    a subscription only ever receives events recorded after it was created, so an event
    nobody subscribes to has no reader, and recording it costs two writes a message."""
    if only_subscribed and docs:
        wanted = await subscribed_events(db, [d["workspace_id"] for d in docs])
        docs = [d for d in docs if (d["workspace_id"], d["event"]) in wanted]
    await insert_all_new(db.outbox, [_queued(d) for d in docs])


async def subscribed_events(db: AsyncDatabase, workspace_ids: list[str]) -> set[tuple[str, str]]:
    """(workspace id, event type) pairs that at least one active subscription listens to."""
    return {(sub["workspace_id"], event)
            for sub in await webhooks.active_for_workspaces(db, workspace_ids)
            for event in sub.get("events") or []}



async def pending(db: AsyncDatabase, limit: int = 500) -> list[dict]:
    """Events not yet fanned out to webhook deliveries, oldest first."""
    return await db.outbox.find({DISPATCH_MS: {"$lt": NEVER_MS}}, sort=[(DISPATCH_MS, 1)], limit=limit).to_list()


async def mark_dispatched(db: AsyncDatabase, event_ids: list[str]) -> None:
    """Guarded per event (`dispatched: false`), by `_id`."""
    if not event_ids:
        return
    at = now_iso()
    await db.outbox.bulk_write([UpdateOne({"_id": e, "dispatched": False},
                                          {"$set": {"dispatched": True, "dispatched_at": at, DISPATCH_MS: NEVER_MS}})
                                for e in event_ids], ordered=False)


async def pending_for_automations(db: AsyncDatabase, limit: int = 500) -> list[dict]:
    """Events automations have not read yet (the triggers and event waits), oldest first."""
    return await db.outbox.find({AUTOMATIONS_MS: {"$lt": NEVER_MS}}, sort=[(AUTOMATIONS_MS, 1)],
                                limit=limit).to_list()


async def mark_read_by_automations(db: AsyncDatabase, event_ids: list[str]) -> None:
    if event_ids:
        await db.outbox.bulk_write([UpdateOne({"_id": e, "automations_pending": True},
                                              {"$set": {"automations_pending": False, AUTOMATIONS_MS: NEVER_MS}})
                                    for e in event_ids],
                                   ordered=False)
