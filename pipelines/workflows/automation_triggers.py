"""What starts automation runs, ends their waits and hands them to the engine
(workflows/advance_automation_runs.py): the scheduler's automation jobs
(ops/automation_jobs.py) call these once per batch or pass.

- `read_events`: outbox events that can start a run or end a wait, read once each
  (`automations_pending`, cleared after). A trigger starts one run per matching
  automation and contact: run ids derive from (automation, contact, event), so an event
  read twice — a crash before it was marked — inserts nothing new. A run waiting for the
  contact's event (found by the (workspace, contact, wait_event) index) moves on.
- `hand_due_runs`: runs whose `wake_ms` has passed go to the `automations` queue
  (an index-bound range on an integer; see pipelines/automations/runs.py).
- `start_date_triggered_runs`: once a day per date_attribute automation, from its time of
  day on, the contacts whose date attribute has its anniversary (plus the offset) today."""

from __future__ import annotations

import datetime as dt

from pymongo.asynchronous.database import AsyncDatabase

from mongo import automation_runs as run_store
from mongo import automations as automation_store
from mongo import campaign_audience, contacts, messages, outbox
from pipelines.automations import runs, triggers
from pipelines.automations import steps as step_rules
from pipelines.automations.run_counts import RunCounts
from pipelines.automations.runs import Move, entry
from pipelines.core.clock import utcnow
from pipelines.core.concurrency import all_finished
from pipelines.workflows.publisher import Publisher

DATE_PAGE = 1000


async def _hand_to_engine(publisher: Publisher, run_ids: list[str]) -> None:
    if run_ids:
        await publisher.advance_runs(run_ids)


def _ready(started: list[run_store.Started]) -> list[str]:
    """The runs just started that have a step to take (not completed at once, not paused)."""
    return [s.run["_id"] for s in started if s.created and s.run is not None and s.run["status"] == "active"]


# -- events ------------------------------------------------------------------------------------

async def read_events(db: AsyncDatabase, publisher: Publisher, events: list[dict]) -> RunCounts:
    """One batch of pending outbox events: the runs they start and the waits they end go
    to the engine, then the events are marked read. Returns what the ended waits did (the
    runs started are counted by the engine as it takes their first step)."""
    counts = RunCounts()
    message_of = await _messages_of(db, events)
    contact_of = await _contacts_of(db, events, message_of)
    ready = await _start_triggered(db, events, message_of, contact_of)
    ready += await _end_waits(db, events, contact_of, counts)
    # the hand-off and the marking at once: a hand-off that fails leaves its runs to the
    # due pass either way (a trigger read again starts nothing new: its runs exist); both
    # finish before a failure of either is raised, so neither is left running unobserved
    await all_finished(_hand_to_engine(publisher, ready),
                       outbox.mark_read_by_automations(db, [e["_id"] for e in events]))
    return counts


async def _messages_of(db: AsyncDatabase, events: list[dict]) -> dict[str, dict]:
    """Message id → the message a message event concerns (its trigger rules read it)."""
    ids = [e["data"]["message_id"] for e in events
           if e["event"] in triggers.MESSAGE_EVENTS and (e.get("data") or {}).get("message_id")]
    return {m["_id"]: m for m in await messages.load(db, ids)} if ids else {}


def _message(event: dict, message_of: dict) -> dict | None:
    return message_of.get((event.get("data") or {}).get("message_id"))


async def _contacts_of(db: AsyncDatabase, events: list[dict], message_of: dict) -> dict[str, dict]:
    """Event id → the live contact it concerns (by id when the event names one, else by address)."""
    by_id: dict[str, set[str]] = {}
    by_email: dict[str, set[str]] = {}
    refs = {}
    for event in events:
        contact_id, email = triggers.event_contact(event, _message(event, message_of))
        refs[event["_id"]] = (event["workspace_id"], contact_id, (email or "").lower())
        if contact_id:
            by_id.setdefault(event["workspace_id"], set()).add(contact_id)
        elif email:
            by_email.setdefault(event["workspace_id"], set()).add(email)
    found_id: dict[tuple[str, str], dict] = {}
    found_email: dict[tuple[str, str], dict] = {}
    for workspace_id, ids in by_id.items():
        for contact in await campaign_audience.live_contacts_by_ids(db, workspace_id, sorted(ids)):
            found_id[(workspace_id, contact["_id"])] = contact
    for workspace_id, emails in by_email.items():
        for key, contact in (await contacts.find_by_emails(db, workspace_id, sorted(emails))).items():
            found_email[(workspace_id, key)] = contact
    out = {}
    for event_id, (workspace_id, contact_id, email) in refs.items():
        known = found_id.get((workspace_id, contact_id)) if contact_id else found_email.get((workspace_id, email))
        if known is not None:
            out[event_id] = known
    return out


async def _start_triggered(db: AsyncDatabase, events: list[dict], message_of: dict,
                           contact_of: dict[str, dict]) -> list[str]:
    wanted = [e for e in events if e["event"] in triggers.EVENT_TRIGGERS and e["_id"] in contact_of]
    automations = await automation_store.triggered_by(
        db, [e["workspace_id"] for e in wanted], [triggers.EVENT_TRIGGERS[e["event"]] for e in wanted])
    requests = [run_store.StartRequest(automation=a, contact=contact_of[e["_id"]], source=e["_id"],
                                       trigger={"type": a["trigger_type"], "event_id": e["_id"],
                                                "data": e.get("data") or {}})
                for e in wanted for a in automations if triggers.trigger_matches(a, e, _message(e, message_of))]
    return _ready(await run_store.start_many(db, requests) if requests else [])


async def _end_waits(db: AsyncDatabase, events: list[dict], contact_of: dict[str, dict],
                     counts: RunCounts) -> list[str]:
    """Runs waiting for this contact's event move to their next step (each move counted
    in `counts`: a wait that was the last step completes the run). The event must have
    happened after the wait began; a paused run takes it too and goes on when resumed."""
    ready = []
    for event in events:
        wait_event, contact = triggers.WAIT_EVENTS.get(event["event"]), contact_of.get(event["_id"])
        if wait_event is None or contact is None:
            continue
        waiting = [r for r in await run_store.waiting_for(db, event["workspace_id"], contact["_id"], wait_event)
                   if r["status"] in runs.OPEN_STATUSES and r["phase"] == "waiting"
                   and r.get("wait_since", "") <= event["timestamp"]]
        automations = await automation_store.load_many(db, list({r["automation_id"] for r in waiting}))
        for run in waiting:
            automation = automations.get(run["automation_id"])
            after = await _end_wait(db, run, automation, event, wait_event) if automation is not None else None
            if after is not None:
                counts.count_moves([(run, after)])
                if run["status"] == "active":
                    ready.append(run["_id"])
    return ready


async def _end_wait(db: AsyncDatabase, run: dict, automation: dict, event: dict, wait_event: str) -> dict | None:
    """The run past its wait, as the write left it (guarded on its version: None when
    another writer moved it first). A paused run keeps its status, and is due when it resumes."""
    step = {"id": run["step_id"], "step_type": "wait_for_event"}
    move = Move(entry(step, "event_received", wait_event, event_id=event["_id"]),
                step_id=step_rules.step_after(automation["steps"], run["step_id"]), status=run["status"])
    update = runs.transition(run, move)
    if run["status"] == "paused" and move.step_id is not None:
        update["$set"].update(wake_ms=runs.NEVER_MS, resume_ms=runs.now_ms())
    return runs.applied(run, update) if await run_store.transition(db, run, update, automation) else None


# -- due runs ----------------------------------------------------------------------------------

async def hand_due_runs(db: AsyncDatabase, publisher: Publisher, due: list[dict]) -> None:
    """Runs found due (mongo.automation_runs.due): their waits become `due`, guarded, with
    the next hand-off a grace period away, and they go to the engine."""
    await run_store.hand_off(db, due, runs.now_ms())
    await _hand_to_engine(publisher, [r["_id"] for r in due])


# -- date_attribute ----------------------------------------------------------------------------

async def start_date_triggered_runs(db: AsyncDatabase, publisher: Publisher) -> int:
    """Today's pass of each active date_attribute automation whose time of day has come,
    once (the pass is marked done). Returns how many runs it handed to the engine."""
    now = utcnow()
    started = 0
    for automation in await automation_store.active_of_type(db, "date_attribute"):
        pass_id = f"{automation['_id']}:{now.date().isoformat()}"
        if not triggers.anniversary_pass_due(now, automation["trigger_config"]["time_of_day"]) \
                or await automation_store.date_pass_done(db, pass_id):
            continue
        started += await _start_anniversaries(db, publisher, automation, now.date())
        await automation_store.mark_date_pass(db, pass_id)
    return started


async def _start_anniversaries(db: AsyncDatabase, publisher: Publisher, automation: dict, today: dt.date) -> int:
    """A run for each contact whose date attribute has its anniversary (plus the offset)
    today, page by page in `_id` order."""
    config = automation["trigger_config"]
    pattern = triggers.anniversary_pattern(today, config["offset_days"])
    started, after = 0, None
    while page := await automation_store.contacts_with_date(db, automation["workspace_id"], config["attribute"],
                                                            pattern, after, DATE_PAGE):
        requests = [run_store.StartRequest(
            automation=automation, contact=c, source=f"date:{today.isoformat()}",
            trigger={"type": "date_attribute", "data": {"attribute": config["attribute"],
                                                        "value": c["attributes"].get(config["attribute"]),
                                                        "date": today.isoformat()}}) for c in page]
        ready = _ready(await run_store.start_many(db, requests))
        await _hand_to_engine(publisher, ready)
        started += len(ready)
        after = page[-1]["_id"]
    return started
