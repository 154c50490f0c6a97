"""Automation runs (`automation_runs`, shape in pipelines/automations/runs.py) and the
re-entry guard (`automation_entries`, one per automation and contact with `after_exit`).

Every write to a run is a compare-and-set on its integer `version` (never on a timestamp),
by `_id` with flat filters: the embedded store takes its fast path only for those. The
engine's moves replace each run whole, the runs at one step in one bulk write
(`transition_many`). flow.triggered travels in the inserted run (the outbox's carrier
fields) until the engine's first move, which pledges it with the flow.completed of the runs
it completes (mongo/outbox: one pledge for the bulk), so each exists exactly when its change
does."""

from __future__ import annotations

import dataclasses
import uuid

from pymongo import ASCENDING, DESCENDING, IndexModel, InsertOne, ReplaceOne, ReturnDocument, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError

from pipelines.automations import runs
from pipelines.automations.triggers import run_id as derive_run_id
from pipelines.automations.triggers import run_source
from pipelines.core.clock import in_seconds, now_iso, utcnow

from . import outbox

INDEXES: dict[str, list] = {
    "automation_runs": [
        # the scheduler's due pass: integer epoch ms, so the range is index-bound
        IndexModel([("wake_ms", ASCENDING)], name="wake"),
        # the metrics' count of waiting runs (operations.open_automation_runs): an equality
        # and a range in one aggregate `$match` are answered from a compound index (on the
        # `wake` index alone it reads every active run)
        IndexModel([("phase", ASCENDING), ("wake_ms", ASCENDING)], name="phase_wake"),
        # a contact's event ends the waits of its runs waiting for that event type
        IndexModel([("workspace_id", ASCENDING), ("contact_id", ASCENDING), ("wait_event", ASCENDING)],
                   name="ws_contact_wait"),
        IndexModel([("automation_id", ASCENDING), ("status", ASCENDING), ("created_at", DESCENDING)],
                   name="automation_status_created"),
        IndexModel([("automation_id", ASCENDING), ("created_at", DESCENDING)], name="automation_created"),
    ],
    "outbox": [IndexModel([(outbox.AUTOMATIONS_MS, ASCENDING)], name="automations_ms")],
}

# A re-entry claim whose run never got stored (its writer died in between) is free after this.
STALE_CLAIM_SECONDS = 60
_PAGE = 1000
# Which bulk write a run's last move came from: when some writes of a bulk found their run
# moved by another worker, the runs holding our token are the ones we moved.
WRITTEN_BY = "written_by"


@dataclasses.dataclass
class Started:
    run: dict | None
    created: bool        # False: the run existed already (the same trigger), or re-entry refused it
    refused: bool = False


@dataclasses.dataclass
class StartRequest:
    automation: dict
    contact: dict        # {_id, email}
    source: str          # what fired: an event id, "api:<uuid>", "date:<day>", "move:<run>:<seq>"
    trigger: dict        # {type, event_id?, data}


def _guarded(run: dict) -> dict:
    return {"_id": run["_id"], "version": run["version"]}


async def _claim_entry(db: AsyncDatabase, automation_id: str, contact_id: str, run_id: str) -> bool:
    """The contact's one open run of an `after_exit` automation: ours, or refused."""
    key, at = f"{automation_id}:{contact_id}", now_iso()
    try:
        await db.automation_entries.insert_one({"_id": key, "run_id": run_id, "at": at})
        return True
    except DuplicateKeyError:
        pass
    taken = await db.automation_entries.update_one({"_id": key, "run_id": ""}, {"$set": {"run_id": run_id, "at": at}})
    if taken.modified_count:
        return True
    entry = await db.automation_entries.find_one({"_id": key})
    if entry is None or entry["run_id"] == run_id:
        return entry is not None
    holder = await db.automation_runs.find_one({"_id": entry["run_id"]}, {"status": 1})
    if holder is None and entry["at"] < in_seconds(-STALE_CLAIM_SECONDS):
        retaken = await db.automation_entries.update_one({"_id": key, "run_id": entry["run_id"]},
                                                         {"$set": {"run_id": run_id, "at": at}})
        return retaken.modified_count == 1
    return False


async def release_entry(db: AsyncDatabase, run: dict) -> None:
    """An ended run frees its contact for the automation's next trigger (after_exit)."""
    if run.get("reentry") == "after_exit":
        await db.automation_entries.update_one({"_id": f"{run['automation_id']}:{run['contact_id']}",
                                                "run_id": run["_id"]}, {"$set": {"run_id": ""}})


async def start_many(db: AsyncDatabase, requests: list[StartRequest]) -> list[Started]:
    """Start a run for each request, or find the one the same trigger started before. One
    bulk insert (duplicates refused by `_id`); the events of runs that ended at once are
    relayed here, those of active runs by the engine's first move of each (which
    rewrites the run anyway: `transition_many`), or by the stranded sweep."""
    results: dict[str, Started] = {}
    planned = await _plan_runs(db, requests, results)
    duplicates = await _insert_runs(db, planned)
    await _record_created(db, [doc for doc in planned if doc["_id"] not in duplicates], results)
    await _record_duplicates(db, duplicates, results)
    order, seen = [], set()
    for req in requests:
        rid = _run_id(req)
        first = results[rid]
        order.append(first if rid not in seen else Started(first.run, created=False, refused=True))
        seen.add(rid)
    return order


def _run_id(req: StartRequest) -> str:
    reentry = req.automation["trigger_config"].get("reentry", "never")
    return derive_run_id(req.automation["_id"], req.contact["_id"], run_source(reentry, req.source))


async def _plan_runs(db: AsyncDatabase, requests: list[StartRequest],
                     results: dict[str, Started]) -> list[dict]:
    """The new run of each request carrying its events, once per run id; a request whose
    contact is in a run already (reentry after_exit) refused into `results`."""
    now = utcnow()
    planned: dict[str, dict] = {}
    listened = await outbox.subscribed_events(db, list({r.automation["workspace_id"] for r in requests})) \
        if requests else set()
    for req in requests:
        automation, contact, rid = req.automation, req.contact, _run_id(req)
        if rid in results or rid in planned:
            continue  # the same run twice in one batch (two events of one contact, reentry never)
        reentry = automation["trigger_config"].get("reentry", "never")
        if reentry == "after_exit" and not await _claim_entry(db, automation["_id"], contact["_id"], rid):
            results[rid] = Started(None, created=False, refused=True)
            continue
        steps = automation["steps"]
        doc = runs.new_run(run_id=rid, automation=automation, contact=contact, trigger=req.trigger,
                           first_step=steps[0]["id"] if steps else None, now=now)
        doc["reentry"] = reentry
        planned[rid] = outbox.inserted_with(doc, _start_events(doc, automation, listened))
    return list(planned.values())


def _start_events(doc: dict, automation: dict, listened: set[tuple[str, str]]) -> list[dict]:
    """flow.triggered, and flow.completed for a run with no steps (done at once)."""
    ended = ("flow.triggered", "flow.completed") if doc["status"] == "completed" else ("flow.triggered",)
    return [_flow_event(doc, automation, event, listened) for event in ended]


def _flow_event(run: dict, automation: dict, event: str, listened: set[tuple[str, str]]) -> dict:
    """The run's flow.* `event` (its id derived from the run's), born dispatched when no
    active subscription of the workspace listens to it (`listened`,
    outbox.subscribed_events): the dispatch would find nobody to deliver it to and mark it
    so, one write an event more, and a subscription made later never receives an event
    older than itself (pipelines/webhooks/events.plan_deliveries). Recorded either way."""
    doc = outbox.event_document(automation["workspace_id"], event, runs.flow_event_data(run, automation),
                                event_id=f"{run['_id']}:{event}")
    if (automation["workspace_id"], event) not in listened:
        doc["dispatched"] = True
    return doc


async def _insert_runs(db: AsyncDatabase, planned: list[dict]) -> set[str]:
    """Insert the planned runs; the ids of those the same trigger started before."""
    if not planned:
        return set()
    try:
        await db.automation_runs.bulk_write([InsertOne(doc) for doc in planned], ordered=False)
    except BulkWriteError as error:
        if any(e.get("code") != 11000 for e in error.details.get("writeErrors", [])):
            raise
        return {planned[e["index"]]["_id"] for e in error.details["writeErrors"]}
    return set()


async def _record_created(db: AsyncDatabase, created: list[dict], results: dict[str, Started]) -> None:
    # a run the engine will move carries flow.triggered until then: its move pledges and
    # records it with its own events, so a write here to empty it would be one write a run more
    await outbox.relay_inserted(db, "automation_runs", [d for d in created if d["status"] != "active"])
    for doc in created:
        if doc["status"] != "active":
            await release_entry(db, doc)
        results[doc["_id"]] = Started(doc, created=True)


async def _record_duplicates(db: AsyncDatabase, duplicates: set[str], results: dict[str, Started]) -> None:
    existing = {d["_id"]: d for d in await db.automation_runs.find({"_id": {"$in": sorted(duplicates)}}).to_list()} \
        if duplicates else {}
    for rid in sorted(duplicates):
        found = existing.get(rid)
        if found is not None and found["status"] in runs.ENDED_STATUSES:
            await release_entry(db, found)  # a repeated trigger of an ended run claimed for nothing
        results[rid] = Started(found, created=False, refused=True)


async def load(db: AsyncDatabase, run_ids: list[str]) -> list[dict]:
    return await db.automation_runs.find({"_id": {"$in": list(run_ids)}}).to_list()


async def get(db: AsyncDatabase, workspace_id: str, automation_id: str, run_id: str) -> dict | None:
    return await db.automation_runs.find_one({"_id": run_id, "workspace_id": workspace_id,
                                              "automation_id": automation_id})


async def page(db: AsyncDatabase, automation_id: str, status: str | None, *, limit: int,
               offset: int) -> tuple[list[dict], int]:
    query: dict = {"automation_id": automation_id}
    if status:
        query["status"] = status
    items = await db.automation_runs.find(query, {field: 0 for field in outbox.CARRIER_FIELDS},
                                          sort=[("created_at", DESCENDING), ("_id", ASCENDING)],
                                          skip=offset, limit=limit).to_list()
    return items, await db.automation_runs.count_documents(query)


async def transition(db: AsyncDatabase, run: dict, update: dict, automation: dict) -> bool:
    """`transition_many` for one run: True when the write landed."""
    return bool(await transition_many(db, [(run, update)], automation))


async def transition_many(db: AsyncDatabase, moves: list[tuple[dict, dict]], automation: dict) -> list[dict]:
    """Apply each `update` (pipelines.automations.runs.transition) to its run of
    `automation` if the run is still at the version we read, all in one bulk write; the
    runs as they now are, of the writes that landed (a run another worker moved first is
    left out). Each run is replaced whole as its update leaves it (`runs.applied`): the
    embedded store replaces a document for less than it `$set`s a few fields and does an
    `$addToSet` in Python (docs/store-notes.md). The runs were read whole, and every other
    write to a run moves its version, except the relay of carried events.

    The events the moves owe — the flow.triggered a run carried since its start, and
    flow.completed for a run this move completes — are pledged for the whole bulk in one
    write (mongo/outbox: a pledge; flow.completed owed only by a run that is completed),
    the runs replaced carrying none, and the events of the runs whose replacement landed
    recorded in one insert: no second write per run to empty its carrier. An ended run
    frees its re-entry claim."""
    if not moves:
        return []
    token = uuid.uuid4().hex
    done = [(run, runs.applied(run, update)) for run, update in moves]
    listened = await outbox.subscribed_events(db, [automation["workspace_id"]]) \
        if any(_completes(run, doc) for run, doc in done) else set()
    owed = {run["_id"]: events for run, doc in done if (events := _owed(run, doc, automation, listened))}
    after = [{**doc, **outbox.no_events(), WRITTEN_BY: token} for _, doc in done]
    pledge_id = await outbox.pledge(db, "automation_runs", owed, owed_when=_OWED_WHEN) if owed else None
    result = await db.automation_runs.bulk_write([ReplaceOne(_guarded(run), doc)
                                                  for (run, _), doc in zip(moves, after, strict=True)], ordered=False)
    landed = after if result.matched_count == len(after) else await _written_by(db, after, token)
    if pledge_id is not None:
        await outbox.redeem(db, pledge_id, [e for doc in landed for e in owed.get(doc["_id"], [])])
    for doc in landed:
        if doc["status"] in runs.ENDED_STATUSES:
            await release_entry(db, doc)
    return landed


# What a run must hold for a pledged event of the engine's to be owed (outbox.pledge).
_OWED_WHEN = {"flow.completed": {"status": "completed"}}


def _completes(run: dict, done: dict) -> bool:
    return done["status"] == "completed" and run["status"] != "completed"


def _owed(run: dict, done: dict, automation: dict, listened: set[tuple[str, str]]) -> list[dict]:
    """The events a move owes: those the run still carried (its flow.triggered), and
    flow.completed when the move completed it."""
    carried = list(run.get(outbox.PENDING) or [])
    if not _completes(run, done):
        return carried
    return [*carried, _flow_event(done, automation, "flow.completed", listened)]


async def _written_by(db: AsyncDatabase, written: list[dict], token: str) -> list[dict]:
    """Of the runs a bulk tried to replace, those its replacement (`token`) landed on."""
    ours = {d["_id"] for d in await db.automation_runs.find(
        {"_id": {"$in": [d["_id"] for d in written]}}, {WRITTEN_BY: 1}).to_list() if d.get(WRITTEN_BY) == token}
    return [d for d in written if d["_id"] in ours]


async def due(db: AsyncDatabase, now_ms: int, limit: int) -> list[dict]:
    """Runs whose wake time has passed, earliest first (index-bound on `wake_ms`)."""
    return await db.automation_runs.find({"wake_ms": {"$lte": now_ms}},
                                         {"_id": 1, "version": 1, "phase": 1, "status": 1, "wake_ms": 1},
                                         sort=[("wake_ms", ASCENDING)], limit=limit).to_list()


async def hand_off(db: AsyncDatabase, found: list[dict], now_ms: int) -> None:
    """Due runs go to the broker: the wait (or a webhook attempt's lease) is over, so
    `waiting`/`calling` become `due`, and the next hand-off is a grace period away."""
    until = now_ms + runs.HANDOFF_GRACE_SECONDS * 1000
    ops = [UpdateOne({**_guarded(r), "status": "active"},
                     {"$set": {"version": r["version"] + 1, "wake_ms": until,
                               "phase": "due" if r["phase"] in ("waiting", "calling") else r["phase"]}})
           for r in found]
    if ops:
        await db.automation_runs.bulk_write(ops, ordered=False)


async def waiting_for(db: AsyncDatabase, workspace_id: str, contact_id: str, wait_event: str) -> list[dict]:
    return await db.automation_runs.find({"workspace_id": workspace_id, "contact_id": contact_id,
                                          "wait_event": wait_event}).to_list()


async def _open_runs(db: AsyncDatabase, automation_id: str, status: str) -> list[dict]:
    return await db.automation_runs.find({"automation_id": automation_id, "status": status},
                                         {"_id": 1, "version": 1, "phase": 1, "wake_ms": 1, "resume_ms": 1,
                                          "automation_id": 1, "contact_id": 1, "reentry": 1},
                                         limit=_PAGE).to_list()


async def pause_all(db: AsyncDatabase, automation_id: str) -> int:
    """The automation's active runs → paused: nothing is due until they resume, and a
    wait keeps its wake time (`resume_ms`). A run a worker moves meanwhile fails its guard
    here, and that worker pauses it itself (it checks its automation's status)."""
    now, done = runs.now_ms(), 0
    while found := await _open_runs(db, automation_id, "active"):
        result = await db.automation_runs.bulk_write([UpdateOne(_guarded(r), {"$set": {
            "status": "paused", "version": r["version"] + 1, "wake_ms": runs.NEVER_MS,
            "resume_ms": r["wake_ms"] if r["phase"] == "waiting" else now, "updated_at": now_iso()}})
            for r in found], ordered=False)
        done += result.modified_count
        if result.modified_count == 0:  # every one moved meanwhile: a pass with no progress ends it
            break
    return done


async def resume_all(db: AsyncDatabase, automation_id: str) -> int:
    """Paused runs → active with their wake time back: waits that ran out meanwhile are
    due at once, the rest wait on."""
    done = 0
    while found := await _open_runs(db, automation_id, "paused"):
        result = await db.automation_runs.bulk_write([UpdateOne(_guarded(r), {"$set": {
            "status": "active", "version": r["version"] + 1, "wake_ms": r["resume_ms"], "updated_at": now_iso()}})
            for r in found], ordered=False)
        done += result.modified_count
        if result.modified_count == 0:  # every one moved meanwhile: a pass with no progress ends it
            break
    return done


def _ending(status: str, reason: str | None) -> dict:
    at = now_iso()
    return {"status": status, "phase": "", "wake_ms": runs.NEVER_MS, "wait_event": "", "ended_at": at,
            "updated_at": at, "error": reason}


async def cancel(db: AsyncDatabase, run: dict, reason: str | None = None) -> bool:
    """An active or paused run → cancelled (guarded on its version)."""
    result = await db.automation_runs.update_one(
        {**_guarded(run), "status": {"$in": list(runs.OPEN_STATUSES)}},
        {"$set": {**_ending("cancelled", reason), "version": run["version"] + 1}})
    if result.modified_count:
        await release_entry(db, run)
    return result.modified_count == 1


async def cancel_all(db: AsyncDatabase, automation_id: str, reason: str) -> int:
    """Every open run of a deleted automation → cancelled."""
    done = 0
    for status in runs.OPEN_STATUSES:
        while found := await _open_runs(db, automation_id, status):
            result = await db.automation_runs.bulk_write(
                [UpdateOne(_guarded(r), {"$set": {**_ending("cancelled", reason), "version": r["version"] + 1}})
                 for r in found], ordered=False)
            done += result.modified_count
            for r in found:
                await release_entry(db, r)
            if result.modified_count == 0:
                break
    return done


async def move_off_steps(db: AsyncDatabase, automation: dict, successors: dict[str, str | None]) -> list[str]:
    """Runs at steps that were removed move to the step that followed (`successors`:
    removed step id → the next surviving step, None past the end: the run completes), ready
    at once — a removed delay no longer holds them. Nothing points at a removed step after.
    Returns the active runs now ready (for the caller to hand to the engine)."""
    ready = []
    for removed, successor in successors.items():
        found = await db.automation_runs.find({"automation_id": automation["_id"],
                                               "status": {"$in": list(runs.OPEN_STATUSES)},
                                               "step_id": removed}).to_list()
        for run in found:
            step = {"id": removed, "step_type": "removed"}
            move = runs.Move(entry=runs.entry(step, "step_removed"), step_id=successor, passed=False,
                             status=run["status"])
            update = runs.transition(run, move)
            if run["status"] == "paused" and successor is not None:
                update["$set"].update(wake_ms=runs.NEVER_MS, resume_ms=runs.now_ms())
            if await transition(db, run, update, automation) and run["status"] == "active" and successor:
                ready.append(run["_id"])
    return ready


async def update_guarded(db: AsyncDatabase, run: dict, fields: dict) -> dict | None:
    """Set `fields` if the run is still at the version we read; the run as it now is, or None."""
    fields = {**fields, "version": run["version"] + 1, "updated_at": now_iso()}
    result = await db.automation_runs.update_one(_guarded(run), {"$set": fields})
    return {**run, **fields} if result.matched_count == 1 else None


async def pause_one(db: AsyncDatabase, run: dict) -> dict | None:
    """A run found active in a paused automation (it moved while the automation paused)."""
    return await update_guarded(db, run, {"status": "paused", "wake_ms": runs.NEVER_MS,
                                          "resume_ms": run["wake_ms"] if run["phase"] == "waiting" else runs.now_ms()})


async def note_engine_error(db: AsyncDatabase, run_id: str, error: str, limit: int) -> bool:
    """Count an unexpected error advancing an active run; at `limit` the run fails with it
    (a run the engine cannot move is set aside, not retried forever). True when it failed."""
    run = await db.automation_runs.find_one_and_update(
        {"_id": run_id, "status": "active"}, {"$inc": {"engine_errors": 1}}, return_document=ReturnDocument.AFTER)
    if run is None or run.get("engine_errors", 0) < limit:
        return False
    failed = await update_guarded(db, run, {**_ending("failed", f"the engine failed {limit} times: {error}")})
    if failed is not None:
        await release_entry(db, run)
    return failed is not None
