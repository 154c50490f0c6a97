"""Messages (one document per email, `_id` = message id): the only record of where each
email is. The rendered MIME is not kept here: it is derived from the message and travels
in the `send` job that delivers it (see actors/send.py).

History entries are appended with `$addToSet`, not `$push`: each entry carries its own
timestamp so the two are the same on MongoDB, and the embedded store corrupts arrays of
sub-documents on `$push` (see tests/mongo/test_store_behaviour.py).

Hot writes are bulk, by `_id` with flat filters (an `$or` beside `_id` makes the embedded
store scan), and `$set` only small fields."""

from __future__ import annotations

from pymongo import ReturnDocument, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from pipelines import delivery_status, mail_streams, recipients
from pipelines.clock import in_seconds, now_iso


async def insert_many(db: AsyncDatabase, docs: list[dict]) -> None:
    if docs:
        await db.messages.insert_many(docs, ordered=True)


async def insert_once(db: AsyncDatabase, doc: dict) -> bool:
    """Insert a message whose `_id` is derived from what makes it (an automation's run and
    step); False when it exists already: the same step ran before and this is a repeat."""
    try:
        await db.messages.insert_one(doc)
    except DuplicateKeyError:
        return False
    return True


async def get(db: AsyncDatabase, workspace_id: str, message_id: str) -> dict | None:
    return await db.messages.find_one({"_id": message_id, "workspace_id": workspace_id})


async def load(db: AsyncDatabase, message_ids: list[str]) -> list[dict]:
    return await db.messages.find({"_id": {"$in": list(message_ids)}}).to_list()


def _transition(message_id: str, new: str, extra: dict | None = None, detail: str | None = None,
                via: tuple[str, ...] = (), *, current: str | None = None, once_sent: bool = False,
                guard: dict | None = None) -> UpdateOne:
    """A guarded move to `new` (from `current` only, when given; `guard` adds conditions);
    `via` names steps passed on the way (e.g. `sent` on the way to `delivered`), each
    recorded with the same timestamp, in one write."""
    at = now_iso()
    entries = [{"status": step, "at": at} for step in via]
    entry = {"status": new, "at": at}
    if detail:
        entry["detail"] = detail
    entries.append(entry)
    stamps = {f"{step}_at": at for step in (*via, new)}
    return UpdateOne(
        {"_id": message_id, "status": current or {"$in": delivery_status.sources_for(new, once_sent=once_sent)},
         **(guard or {})},
        {"$set": {"status": new, "updated_at": at, **stamps, **(extra or {})},
         "$addToSet": {"history": {"$each": entries}}})


async def advance(db: AsyncDatabase, changes: list[tuple], *, expected: str | None = None,
                  once_sent: bool = False) -> int:
    """Apply (message_id, new_status, extra fields, detail[, via]) transitions that move forward
    (`once_sent`: only for messages the send step has reached, see delivery_status).

    `expected`: the status the caller knows the messages are in (the send step's claimed
    `sending`). That flat filter goes first — the embedded store pays a third more per
    write for the general `status: {$in: ...}` guard — and only when some message was not
    in it (moved meanwhile) does the general guarded move follow, for all of them (those
    already moved no longer match it)."""
    if not changes:
        return 0
    if expected:
        first = await db.messages.bulk_write([_transition(*c, current=expected) for c in changes], ordered=False)
        if first.modified_count == len(changes):
            return first.modified_count
    result = await db.messages.bulk_write([_transition(*c, once_sent=once_sent) for c in changes], ordered=False)
    return result.modified_count + (first.modified_count if expected else 0)


async def cancel_scheduled(db: AsyncDatabase, workspace_id: str, message_id: str) -> dict | None:
    at = now_iso()
    return await db.messages.find_one_and_update(
        {"_id": message_id, "workspace_id": workspace_id, "status": "scheduled"},
        {"$set": {"status": "cancelled", "cancelled_at": at, "updated_at": at},
         "$addToSet": {"history": {"status": "cancelled", "at": at}}},
        return_document=ReturnDocument.AFTER)


# What the send step reads of a claimed message: enough to throttle, record outcomes,
# events and counts — never the bodies (html, text) or the history.
SEND_FIELDS = {"_id": 1, "workspace_id": 1, "key_id": 1, "kind": 1, "to": 1, "subject": 1, "status": 1,
               "attempts": 1, "batch_id": 1, "campaign_id": 1, "accepted_recipients": 1, "refused_recipients": 1,
               "suppressed_recipients": 1, "deferred_since": 1}


async def claim_for_sending(db: AsyncDatabase, message_ids: list[str], token: str,
                            lease_seconds: int) -> list[dict]:
    """Guarded claim: a queued message, or one whose earlier sending lease ran out (its
    worker died mid-send), becomes `sending` under our token. This is the single guard
    against sending twice: a redelivered or duplicated send job finds nothing left to
    claim. A job retried after a failure holds the same token (actors/send.py), so it
    takes back its own claim — one written but never read back, when the store failed
    in between — with a fresh lease, instead of leaving it `sending` for a whole lease.
    Returns the claimed messages' SEND_FIELDS."""
    now = now_iso()
    claim = {"$set": {"status": "sending", "lease_token": token,
                      "lease_until": in_seconds(lease_seconds), "updated_at": now}}
    # Flat filters rather than one `$or`: beside `_id`, an `$or` makes the embedded
    # store scan the collection for every update (4.4 ms a message at 1,000 messages,
    # against 0.2 ms flat), and MongoDB is as happy with either.
    fresh = await db.messages.bulk_write(
        [UpdateOne({"_id": mid, "status": "queued"}, claim) for mid in message_ids], ordered=False)
    if fresh.modified_count < len(message_ids):
        await db.messages.bulk_write(
            [UpdateOne({"_id": mid, "status": "sending", "lease_until": {"$lt": now}}, claim)
             for mid in message_ids]
            + [UpdateOne({"_id": mid, "status": "sending", "lease_token": token}, claim) for mid in message_ids],
            ordered=False)
    return await db.messages.find({"_id": {"$in": list(message_ids)}, "lease_token": token,
                                   "status": "sending"}, SEND_FIELDS).to_list()


async def fail_many(db: AsyncDatabase, reasons: dict[str, str]) -> None:
    """queued → failed with the reason (e.g. a message that cannot be rendered)."""
    await advance(db, [(mid, "failed", {"error": why}, why) for mid, why in reasons.items()])


async def due_scheduled(db: AsyncDatabase, limit: int = 500) -> list[dict]:
    now = now_iso()
    docs = await db.messages.find(
        {"status": "scheduled", "due_at": {"$lte": now}},
        {"_id": 1, "workspace_id": 1, "due_at": 1}, limit=limit, sort=[("due_at", 1)]).to_list()
    # Checked again here: the embedded store compares these strings at whole seconds.
    return [d for d in docs if d["due_at"] <= now]


async def promote(db: AsyncDatabase, message_id: str) -> bool:
    """scheduled → queued, guarded, so two schedulers never both enqueue one message."""
    at = now_iso()
    result = await db.messages.update_one(
        {"_id": message_id, "status": "scheduled"},
        {"$set": {"status": "queued", "queued_at": at, "updated_at": at},
         "$addToSet": {"history": {"status": "queued", "at": at}}})
    return result.modified_count == 1


async def release_for_retry(db: AsyncDatabase, message_ids: list[str], token: str, notes: dict[str, str],
                            *, count_attempt: bool = True, progress: dict[str, dict] | None = None,
                            next_attempt_at: dict[str, str] | None = None) -> None:
    """sending → queued, guarded on our claim, after a transient failure (a `deferred`
    history entry, one more attempt) or a throttle hold (neither: it was not tried).
    `progress`: per message, fields this attempt settled (`accepted_recipients`,
    `refused_recipients`: never sent again; `deferred_since`). `next_attempt_at`: the
    messages whose next attempt waits in the store (the scheduler enqueues their render
    when due, `due_retries`); the caller re-enqueues the others' send job with the MIME."""
    at = now_iso()
    ops = []
    for mid in message_ids:
        update: dict = {"$set": {"status": "queued", "updated_at": at, "lease_token": "",
                                 **(progress or {}).get(mid, {})}}
        if count_attempt:
            due = (next_attempt_at or {}).get(mid, "")
            detail = notes.get(mid) or ""
            if due:
                detail += f"; next attempt at {due}"
            update["$set"].update(last_error=notes.get(mid), next_attempt_at=due, revivals=0)
            update["$inc"] = {"attempts": 1}
            update["$addToSet"] = {"history": {"status": "deferred", "at": at, "detail": detail}}
        ops.append(UpdateOne({"_id": mid, "status": "sending", "lease_token": token}, update))
    if ops:
        await db.messages.bulk_write(ops, ordered=False)


async def due_retries(db: AsyncDatabase, limit: int = 500) -> list[dict]:
    """Queued messages whose next SMTP attempt waited in the store and is now due."""
    now = now_iso()
    docs = await db.messages.find({"status": "queued", "next_attempt_at": {"$gt": "", "$lte": now}},
                                  {"_id": 1, "attempts": 1, "next_attempt_at": 1}, limit=limit,
                                  sort=[("next_attempt_at", 1)]).to_list()
    # Checked again here: the embedded store compares these strings at whole seconds.
    return [d for d in docs if d["next_attempt_at"] <= now]


async def take_due_retry(db: AsyncDatabase, message_id: str, attempts: int) -> bool:
    """Its wait is over: guarded on the wait still being set and the attempt count seen
    (an integer, not the timestamp), so two schedulers never both enqueue one retry."""
    result = await db.messages.update_one(
        {"_id": message_id, "status": "queued", "attempts": attempts, "next_attempt_at": {"$gt": ""}},
        {"$set": {"next_attempt_at": "", "updated_at": now_iso()}})
    return result.modified_count == 1


async def note_handoff_failed(db: AsyncDatabase, message_ids: list[str], why: str) -> None:
    """A render whose send job did not reach the broker: the reason stays on the still
    queued messages (`last_error`, and a `deferred` history entry), for the watchdog to
    show if it has to give up on them."""
    at = now_iso()
    if message_ids:
        await db.messages.bulk_write([UpdateOne({"_id": mid, "status": "queued"},
                                                {"$set": {"last_error": why},
                                                 "$addToSet": {"history": {"status": "deferred", "at": at,
                                                                           "detail": why}}})
                                      for mid in message_ids], ordered=False)


# The watchdog (ops/scheduler.requeue_stalled_messages): messages whose next step was lost.

# What the watchdog reads of a stalled message.
_STALLED_FIELDS = {"_id": 1, "updated_at": 1, "lease_until": 1, "revivals": 1, "last_error": 1, "batch_id": 1}


async def stale_queued(db: AsyncDatabase, older_than_seconds: int, limit: int) -> list[dict]:
    """Queued messages nothing has touched for `older_than_seconds` (an enqueue lost in a
    crash between store and broker, or a send job lost with its MIME) — not those
    waiting in the store for their next SMTP attempt (`next_attempt_at`)."""
    cutoff = in_seconds(-older_than_seconds)
    docs = await db.messages.find({"status": "queued", "updated_at": {"$lt": cutoff},
                                   "next_attempt_at": {"$in": [None, ""]}},
                                  _STALLED_FIELDS, limit=limit).to_list()
    # Checked again here: the embedded store compares these strings at whole seconds.
    return [d for d in docs if d["updated_at"] < cutoff]


async def lapsed_sending(db: AsyncDatabase, limit: int) -> list[dict]:
    """Messages still `sending` after their claim's lease ran out: the worker died mid-send."""
    now = now_iso()
    docs = await db.messages.find({"status": "sending", "lease_until": {"$lt": now}},
                                  _STALLED_FIELDS, limit=limit).to_list()
    return [d for d in docs if d["lease_until"] < now]


async def requeue(db: AsyncDatabase, stale_ids: list[str], lapsed_ids: list[str]) -> None:
    """Before the watchdog enqueues their render again: stale queued messages are touched
    (so the next pass leaves them alone for a while), lapsed ones go back to `queued`
    (guarded on the lapsed lease, so a claim taken meanwhile stands); each counts one
    more revival."""
    at = now_iso()
    ops = [UpdateOne({"_id": mid, "status": "queued"}, {"$set": {"updated_at": at}, "$inc": {"revivals": 1}})
           for mid in stale_ids]
    ops += [UpdateOne({"_id": mid, "status": "sending", "lease_until": {"$lt": at}},
                      {"$set": {"status": "queued", "updated_at": at, "lease_token": ""},
                       "$inc": {"revivals": 1},
                       "$addToSet": {"history": {"status": "deferred", "at": at,
                                                 "detail": "send lease expired; sending again"}}})
            for mid in lapsed_ids]
    if ops:
        await db.messages.bulk_write(ops, ordered=False)


async def abandon(db: AsyncDatabase, stale: dict[str, str], lapsed: dict[str, str]) -> list[str]:
    """The watchdog gives up: stalled messages (id → reason) end `failed`, guarded as in
    `requeue`. Returns the ids that moved (a claim taken meanwhile stands)."""
    at = now_iso()
    moved = []  # one write each (rare), to know which moved
    for mid, why in [*stale.items(), *lapsed.items()]:
        lapsed_one = mid in lapsed
        op = _transition(mid, "failed", {"error": why}, why, current="sending" if lapsed_one else "queued",
                         guard={"lease_until": {"$lt": at}} if lapsed_one else None)
        if (await db.messages.bulk_write([op])).modified_count:
            moved.append(mid)
    return moved


async def withhold_suppressed(db: AsyncDatabase, docs: list[dict]) -> list[dict]:
    """For the render step: recipients still owed the message who were suppressed since it
    was accepted (a bounce, complaint or unsubscribe while a scheduled email waited, or
    while campaign mail sat in the queue) are taken out as the API does at accept time
    (pipelines.recipients.without_suppressed; which reasons count depends on the message's
    stream, pipelines.mail_streams); a message left with nobody becomes `suppressed` (and
    counts as such in its batch). Returns the messages still to render. One suppression
    read per workspace, by `_id`."""
    from . import batches, suppressions
    wanted: dict[str, set[str]] = {}
    for d in docs:
        wanted.setdefault(d["workspace_id"], set()).update(recipients.owed_recipients(d))
    reasons = {ws: await suppressions.reasons_among(db, ws, list(emails)) for ws, emails in wanted.items()}
    if not any(reasons.values()):
        return docs
    keep, finished = [], []
    for d in docs:
        blocked = mail_streams.blocked_addresses(mail_streams.stream_of(d), reasons[d["workspace_id"]])
        split = recipients.without_suppressed(d, blocked)
        if split is None:
            keep.append(d)
            continue
        changes, nobody_left = split
        if not nobody_left:
            trimmed = await db.messages.update_one({"_id": d["_id"], "status": d["status"]}, {"$set": changes})
            if trimmed.modified_count:
                keep.append({**d, **changes})
            continue
        moved = await db.messages.bulk_write([_transition(
            d["_id"], "suppressed", changes, "every recipient was suppressed before sending", current=d["status"])])
        if moved.modified_count:  # guarded: a redelivered render counts it once
            finished.append((d, "suppressed"))
    await batches.record_finished(db, finished)
    return keep
