"""Messages (one document per email, `_id` = message id): the only record of where each
email is. The rendered MIME is not kept here: it is derived from the message and travels
in the `send` job that delivers it (see pipelines/workflows/send_chunk.py).

History entries are appended with `$addToSet`, not `$push`: each entry carries its own
timestamp so the two are the same on MongoDB, and the embedded store corrupts arrays of
sub-documents on `$push` (see tests/mongo/test_store_behaviour.py).

Every status write is a `pipelines.messages.delivery_status.Transition` (built there, from its one
table), turned into a guarded update here (`apply`). Hot writes are bulk, by `_id` with
flat filters (an `$or` beside `_id` makes the embedded store scan), and `$set` only small
fields — or, for a message its writer holds read whole, replace it whole (Held)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TypeGuard

from pymongo import ReplaceOne, ReturnDocument, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError

from pipelines.core.clock import in_seconds, ms_of, now_iso, now_ms
from pipelines.core.documents import Message
from pipelines.messages import delivery_status
from pipelines.messages.delivery_status import NEVER_MS, Transition
from pipelines.messages.mail_streams import MARKETING, MARKETING_KINDS, TRANSACTIONAL

from . import message_search


def watched(doc: dict) -> dict:
    """A new message with its scheduler times (delivery_status.watch), unclaimed unless
    it is stored born claimed (delivery_status.born_claim): every insert goes through
    here. Also what GET /email finds it by (mongo/message_search.py): `created_ms` (its
    `created_at` as integer epoch ms: what time windows, the order and the retention job
    range over), `to_key` (its first recipient, lower-cased) and `stream` (a campaign's
    or an automation's mail is marketing)."""
    doc.setdefault("lease_token", delivery_status.UNCLAIMED)
    doc.setdefault("created_ms", ms_of(doc["created_at"]))
    doc.setdefault("to_key", message_search.to_key(doc))
    doc.setdefault("stream", MARKETING if doc.get("kind") in MARKETING_KINDS else TRANSACTIONAL)
    doc.update(delivery_status.watch(doc["status"], doc["updated_at"], doc))
    return doc


async def insert_many(db: AsyncDatabase, docs: list[dict]) -> None:
    if docs:
        docs = [watched(d) for d in docs]
        await message_search.insert_keys(db, docs)
        await db.messages.insert_many(docs, ordered=True)


async def insert_once(db: AsyncDatabase, doc: dict) -> bool:
    """Insert a message whose `_id` is derived from what makes it (an automation's run and
    step); False when it exists already: the same step ran before and this is a repeat."""
    try:
        await db.messages.insert_one(watched(doc))
    except DuplicateKeyError:
        return False
    return True


async def get(db: AsyncDatabase, workspace_id: str, message_id: str) -> Message | None:
    return await db.messages.find_one({"_id": message_id, "workspace_id": workspace_id})


async def load(db: AsyncDatabase, message_ids: list[str], fields: dict | None = None) -> list[dict]:
    return await db.messages.find({"_id": {"$in": list(message_ids)}}, fields).to_list()


@dataclasses.dataclass(frozen=True)
class Held:
    """Messages the caller holds: by id, the status each is held in (`sending` under a
    claim, or `queued` under a born claim, delivery_status.born_claim) and the claim's
    token; with the `history` each had when claimed. Nothing else writes to a message held
    so (the recipient's side reports only once it is sent; a watchdog's revival first
    takes the claim away), so a write guarded on the claim can set the whole history — the
    old entries and the new — with a plain `$set`: the embedded store pays half as much
    again for an `$addToSet`, which it does in Python (see docs/store-notes.md).
    `docs`: the whole documents, when the caller read them whole (a render job): a write
    guarded on the claim then replaces the document as the move leaves it, which the
    embedded store does for ~0.4 ms of CPU against ~0.65 ms for the same `$set` of ten
    fields (it re-parses the document's JSON for each field it sets)."""
    claims: Mapping[str, tuple[str, str]]
    histories: Mapping[str, list]
    docs: Mapping[str, dict] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, docs: list[dict], *, whole: bool = False) -> Held:
        """The claims on `docs` as read under them (`status`, `lease_token`, `history`;
        `whole`: the documents are whole)."""
        return cls({d["_id"]: (d["status"], d["lease_token"]) for d in docs},
                   {d["_id"]: d["history"] for d in docs if isinstance(d.get("history"), list)},
                   {d["_id"]: d for d in docs} if whole else {})


def _moves(t: Transition, at: str) -> tuple[dict, list[dict]]:
    """What `t` sets and the history entries it appends, at `at`."""
    entries = [{"status": step, "at": at} for step in t.via]
    if t.entry:
        entries.append({"status": t.entry, "at": at, **({"detail": t.detail} if t.detail else {})})
    stamps = {f"{step}_at": at for step in (*t.via, t.to)} if t.stamped else {}
    watched = delivery_status.watch(t.to, at, t.fields)
    return {"status": t.to, "updated_at": at, **stamps, **t.fields, **watched}, entries


def _filter(t: Transition, source: str | None = None, held: Held | None = None) -> dict:
    """Where `t` may apply: from `source` only, when given (one of its sources); on the
    claim too when `held` holds the message with its history."""
    sources = (source,) if source else t.sources
    claim = {"lease_token": held.claims[t.message_id][1]} if _holds_history(held, t) else {}
    # A flat `status` when there is one source: beside `_id`, the embedded store pays
    # more for `$in` (and scans for an `$or`).
    return {"_id": t.message_id, "status": sources[0] if len(sources) == 1 else {"$in": list(sources)},
            **t.guard, **claim}


def _holds_history(held: Held | None, t: Transition) -> TypeGuard[Held]:
    return held is not None and t.message_id in held.histories


def _guarded(t: Transition, at: str, source: str | None = None, held: Held | None = None) -> tuple[dict, dict]:
    """`t` as a filter and an update (`held`: guarded on the claim too, the history
    written whole)."""
    changes, entries = _moves(t, at)
    update: dict = {"$set": changes}
    if t.inc:
        update["$inc"] = dict(t.inc)
    if _holds_history(held, t):
        update["$set"]["history"] = [*held.histories[t.message_id], *entries]
    elif entries:
        update["$addToSet"] = {"history": {"$each": entries}}
    return _filter(t, source, held), update


def _update(t: Transition, at: str, *, source: str | None = None,
            held: Held | None = None) -> UpdateOne | ReplaceOne:
    if _holds_history(held, t) and t.message_id in held.docs:
        return ReplaceOne(_filter(t, source, held), _moved(held.docs[t.message_id], t, at))
    return UpdateOne(*_guarded(t, at, source, held))


def _moved(doc: dict, t: Transition, at: str) -> dict:
    """`doc` as `t` leaves it, whole."""
    changes, entries = _moves(t, at)
    new = {**doc, **changes, "history": [*doc.get("history", []), *entries]}
    for field, step in t.inc.items():
        new[field] = new.get(field, 0) + step
    return new


async def apply(db: AsyncDatabase, transitions: list[Transition], *, held: Held | None = None) -> int:
    """Write the transitions, each guarded on its sources; how many moved.

    `held`: the messages the caller holds (the send step's claims, see Held), in the
    status it knows. That flat filter, on the claim, goes first — the embedded store pays
    a third more per write for the general `status: {$in: ...}` guard — and only when some
    message was not in it (moved meanwhile) does the general guarded move follow, for all
    of them (those already moved no longer match it)."""
    if not transitions:
        return 0
    at = now_iso()
    first = 0
    if held and all(held.claims.get(t.message_id, ("",))[0] in t.sources for t in transitions):
        first = (await db.messages.bulk_write([_update(t, at, source=held.claims[t.message_id][0], held=held)
                                               for t in transitions], ordered=False)).modified_count
        if first == len(transitions):
            return first
    result = await db.messages.bulk_write([_update(t, at) for t in transitions], ordered=False)
    return result.modified_count + first


async def insert_moved(db: AsyncDatabase, docs: Mapping[str, dict], transitions: list[Transition]) -> int:
    """Messages never stored yet (a campaign part's, held in memory by its job: see
    pipelines/workflows/render_chunk.render_part), inserted once, as the transitions
    leave them: the one write each recipient costs. One transition per message, from the
    status it is held in. One that exists already (an earlier run of the same part
    recorded it) is left as it is. How many were inserted."""
    if not transitions:
        return 0
    at = now_iso()
    moved = []
    for t in transitions:
        doc = docs[t.message_id]
        if doc["status"] not in t.sources:
            raise ValueError(f"message {t.message_id} is {doc['status']}, not in {t.sources}")
        moved.append(_moved(doc, t, at))
    return await insert_new(db, moved)


async def insert_new(db: AsyncDatabase, docs: list[dict]) -> int:
    """Insert messages whose `_id`s are derived from what makes them; ones that exist
    already (the same work done twice) are skipped. How many were new."""
    if not docs:
        return 0
    try:
        return len((await db.messages.insert_many([watched(d) for d in docs], ordered=False)).inserted_ids)
    except BulkWriteError as error:
        if any(e.get("code") != 11000 for e in error.details.get("writeErrors", [])):
            raise
        return int(error.details.get("nInserted", 0))


async def apply_one(db: AsyncDatabase, t: Transition, *, workspace_id: str) -> Message | None:
    """One transition of a message of `workspace_id`; the message after it, or None when
    it did not apply."""
    guard, update = _guarded(t, now_iso())
    return await db.messages.find_one_and_update({**guard, "workspace_id": workspace_id}, update,
                                                 return_document=ReturnDocument.AFTER)


# What the send step reads of a claimed message: enough to throttle, record outcomes
# (the history, written back whole with the outcome's entries: Held), events (with the
# caller's metadata and tags) and counts —
# never the bodies (html, text).
SEND_FIELDS = {"_id": 1, "workspace_id": 1, "key_id": 1, "kind": 1, "to": 1, "cc": 1, "bcc": 1, "subject": 1,
               "status": 1, "metadata": 1, "tags": 1,
               "attempts": 1, "batch_id": 1, "campaign_id": 1, "accepted_recipients": 1, "refused_recipients": 1,
               "suppressed_recipients": 1, "deferred_since": 1, "history": 1, "lease_token": 1, "lease_until": 1,
               "smtp_attempts": 1}


async def claim_for_sending(db: AsyncDatabase, message_ids: list[str], token: str,
                            lease_seconds: int, *, whole: bool = False,
                            born: Mapping[str, str] | None = None) -> list[dict]:
    """Guarded claim: an unclaimed queued message, or one whose earlier lease ran out (its
    worker died, or the job of its born claim never ran), becomes `sending` under our
    token. This is the single guard
    against sending twice: a redelivered or duplicated send job finds nothing left to
    claim. A job retried after a failure holds the same token
    (pipelines/workflows/send_chunk.py), so it takes back its own claim — one written but
    never read back, when the store failed in between — with a fresh lease, instead of
    leaving it `sending` for a whole lease.
    `born`: message id → the born claim's token (delivery_status.born_claim) the caller
    holds on it, turned into this claim.
    Returns the claimed messages' SEND_FIELDS (`whole`: the whole documents, to render)."""
    if not message_ids:
        return []
    born = born or {}
    now, lease_until = now_ms(), in_seconds(lease_seconds)
    # Flat filters rather than one `$or`: beside `_id`, an `$or` makes the embedded
    # store scan the collection for every update (4.4 ms a message at 1,000 messages,
    # against 0.2 ms flat), and MongoDB is as happy with either.
    first = [delivery_status.claim(mid, token, lease_until, born=born.get(mid)) for mid in message_ids]
    if await apply(db, first) < len(message_ids):
        await apply(db, [delivery_status.claim_lapsed(mid, token, lease_until, before_ms=now) for mid in message_ids]
                    + [delivery_status.claim_again(mid, token, lease_until) for mid in message_ids])
    return await db.messages.find({"_id": {"$in": list(message_ids)}, "lease_token": token,
                                   "status": "sending"}, None if whole else SEND_FIELDS).to_list()


async def _come(db: AsyncDatabase, field: str, upto_ms: int, status: str, fields: dict, limit: int,
                claim: dict | None = None) -> list[dict]:
    """Messages in `status` whose scheduler time `field` (`due_ms` or `stall_ms`,
    delivery_status.watch) is at most `upto_ms`, earliest first: one indexed range.
    `claim`: a condition on `lease_token` too."""
    return await db.messages.find({field: {"$lte": upto_ms}, "status": status, **(claim or {})}, fields,
                                  limit=limit, sort=[(field, 1)]).to_list()


async def any_due(db: AsyncDatabase) -> bool:
    """Whether some message's `due_ms` has come, whatever its status (a scheduled one, a
    retry waiting in the store, a lapsed claim): one indexed probe, so an idle scheduler
    pass reads nothing more of messages."""
    return await db.messages.find_one({"due_ms": {"$lte": now_ms()}}, {"_id": 1}) is not None


async def due_scheduled(db: AsyncDatabase, limit: int = 500) -> list[dict]:
    return await _come(db, "due_ms", now_ms(), "scheduled", {"_id": 1, "workspace_id": 1, "due_at": 1}, limit)


async def due_retries(db: AsyncDatabase, limit: int = 500) -> list[dict]:
    """Queued messages whose next SMTP attempt waited in the store and is now due."""
    # (a queued message whose due time is a born claim's lease end is the watchdog's: lapsed_claims)
    return await _come(db, "due_ms", now_ms(), "queued", {"_id": 1, "attempts": 1, "next_attempt_at": 1}, limit,
                       claim={"lease_token": delivery_status.UNCLAIMED})


async def take_due_retry(db: AsyncDatabase, message_id: str, attempts: int) -> bool:
    """Its wait is over (delivery_status.wait_over): True for the one scheduler that
    takes it."""
    return await apply(db, [delivery_status.wait_over(message_id, attempts)]) == 1


async def note_handoff_failed(db: AsyncDatabase, message_ids: list[str], why: str, born: Sequence[str] = ()) -> None:
    """A render whose send job did not reach the broker (delivery_status.handoff_lost)."""
    await apply(db, [delivery_status.handoff_lost(mid, why, tuple(born)) for mid in message_ids])


# The watchdog (pipelines/workflows/message_watchdog.py): messages whose next step was lost.

# What the watchdog reads of a stalled message.
_STALLED_FIELDS = {"_id": 1, "status": 1, "updated_at": 1, "lease_until": 1, "revivals": 1, "last_error": 1,
                   "batch_id": 1}


async def stale_queued(db: AsyncDatabase, older_than_seconds: int, limit: int) -> list[dict]:
    """Queued messages nothing has touched for `older_than_seconds` (an enqueue lost in a
    crash between store and broker, or a send job lost with its MIME) — not those
    waiting in the store for their next SMTP attempt (their `stall_ms` is NEVER_MS)."""
    return await _come(db, "stall_ms", now_ms() - older_than_seconds * 1000, "queued", _STALLED_FIELDS, limit)


async def lapsed_claims(db: AsyncDatabase, limit: int) -> list[dict]:
    """Messages held past their claim's lease: still `sending` (the worker died mid-send),
    or `queued` under a born claim (the job it was handed to never ran: its publisher
    died between the store write and the publish, or the job was lost)."""
    sending = await _come(db, "due_ms", now_ms(), "sending", _STALLED_FIELDS, limit)
    if len(sending) >= limit:
        return sending
    born = await _come(db, "due_ms", now_ms(), "queued", _STALLED_FIELDS, limit - len(sending),
                       claim={"lease_token": {"$ne": delivery_status.UNCLAIMED}})
    return sending + born


# What the start-time pickup reads of a message (ops/scheduler.pick_up_accepted).
_PICKUP_FIELDS = {"_id": 1, "updated_at": 1, "lease_token": 1, "lease_ms": 1}


async def in_flight(db: AsyncDatabase, status: str, limit: int) -> list[dict]:
    """Every message in `status` (`queued` or `sending`) the scheduler has a time for:
    queued ones not waiting in the store for their next SMTP attempt (`stall_ms`), sending
    ones (`due_ms`, their lease's end). One indexed range each, as long as the work in
    flight (a start-time pass, not a tick's)."""
    field = "stall_ms" if status == "queued" else "due_ms"
    return await _come(db, field, NEVER_MS - 1, status, _PICKUP_FIELDS, limit)


async def requeue(db: AsyncDatabase, stale_ids: list[str], revived: list[Transition]) -> None:
    """Before the watchdog enqueues their render again, in one write: stale queued
    messages are touched and count one more revival (delivery_status.requeue_stale); the
    `revived` transitions (delivery_status.revive) apply."""
    await apply(db, [delivery_status.requeue_stale(mid) for mid in stale_ids] + revived)


async def apply_each(db: AsyncDatabase, transitions: list[Transition]) -> list[str]:
    """The transitions one write each (rare: the watchdog giving up), to know which
    moved; their message ids."""
    moved = []
    for t in transitions:
        if await apply(db, [t]):
            moved.append(t.message_id)
    return moved


async def trim_recipients(db: AsyncDatabase, doc: dict, changes: dict) -> bool:
    """Recipients taken out of a message still in the status it was read in (guarded);
    False when it moved meanwhile."""
    trimmed = await db.messages.update_one({"_id": doc["_id"], "status": doc["status"]}, {"$set": changes})
    return trimmed.modified_count == 1
