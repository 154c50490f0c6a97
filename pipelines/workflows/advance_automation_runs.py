"""Automation runs moved forward step by step (the `automations` queue's jobs, run by
actors/automations.py).

A job names runs; they are loaded and advanced until each waits (a delay, an event, a
webhook retry), ends, or has taken MAX_STEPS_PER_JOB steps (then it is enqueued again).
The runs at the same step of the same automation move together: their contacts read at
once, the step taken for all (the email step as one group: take_automation_step.GROUP_KINDS),
and their moves written in one bulk write — then each part of the group goes on from the
step it reached, on its own, so one group's slow webhook or error holds back no other.
Every move is a compare-and-set on the run's `version` (mongo.automation_runs), so a
redelivered or duplicated job moves a run once, and each side effect is keyed so that doing
the step again after a crash finds it done:

    email           message `_id` derived from (run, step, visit): inserted once; the
                    render it publishes is guarded by the message's own claim
    tag, lists      the membership write is guarded (a repeat changes nothing, emits nothing)
    update_attribute contacts.update writes (and emits contact.updated) only what differs
    move_to_flow    the target run's id is derived from (run, visit): started once
    webhook         each attempt is claimed (phase `calling`, attempts + 1) before the call;
                    an attempt cut by a crash counts as failed and is retried like a timeout,
                    with the same X-Postroom-Delivery-Id for the receiver to dedupe

Delays, event waits and webhook retries wait in the store (`wake_ms`); the scheduler
hands due runs back to this queue (workflows/automation_triggers.py). The step kinds
themselves are workflows/take_automation_step.py."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from pymongo.asynchronous.database import AsyncDatabase

from mongo import automation_runs as run_store
from mongo.automations import load_many as load_automations
from pipelines.automations import runs
from pipelines.automations import steps as step_rules
from pipelines.automations.run_counts import RunCounts
from pipelines.automations.runs import Move, entry
from pipelines.core.settings import Settings
from pipelines.workflows.publisher import Publisher
from pipelines.workflows.take_automation_step import (
    CHANGES_CONTACT,
    GROUP_KINDS,
    STEP_KINDS,
    HttpRequest,
    JobView,
    Stop,
    webhook,
)

log = logging.getLogger("postroom.automations")

MAX_STEPS_PER_JOB = 50           # steps one job takes for one run before handing it on
# Unexpected errors advancing one run before it is failed with the last of them.
MAX_ENGINE_ERRORS = 10


async def advance_runs(db: AsyncDatabase, settings: Settings, publisher: Publisher, http: HttpRequest,
                       run_ids: Sequence[str], counts: RunCounts | None = None) -> None:
    """Each run as far as it goes in this job, what it did added to `counts` as it lands
    (runs started, steps taken, runs ended). A run that raised has its error noted (failed
    after MAX_ENGINE_ERRORS) and the job raises, to be retried: runs that moved meanwhile
    are found where they are, and counted already."""
    loaded = await run_store.load(db, list(run_ids))
    job = JobView(db, settings, publisher, http, await load_automations(db, list({r["automation_id"] for r in loaded})),
                  counts=counts or RunCounts())
    failed = await _advance_groups(job, loaded, MAX_STEPS_PER_JOB)
    await _note_errors(job, failed)
    if failed:
        raise failed[0][1]


Failures = list[tuple[str, BaseException]]  # (run id, what it raised)


async def _advance_groups(job: JobView, in_hand: list[dict], steps_left: int) -> Failures:
    """The movable runs in hand, each group at one step on its own: one group's error
    leaves the others' progress standing."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for run in in_hand:
        if _movable(run):
            groups.setdefault((run["automation_id"], run["step_id"], run["phase"]), []).append(run)
    results = await asyncio.gather(*(_advance_together(job, group, steps_left) for group in groups.values()),
                                   return_exceptions=True)
    failed: Failures = []
    for group, result in zip(groups.values(), results, strict=True):
        failed += [(run["_id"], result) for run in group] if isinstance(result, BaseException) else result
    return failed


async def _advance_together(job: JobView, group: list[dict], steps_left: int) -> Failures:
    """Runs at one step of one automation: the step taken for all and their moves written
    at once, then on from wherever each went."""
    if steps_left == 0:  # their share of this job is used up: on to another
        await job.publisher.advance_runs([run["_id"] for run in group])
        return []
    automation = await _automation_running(job, group)
    if automation is None:
        return []
    await job.read_contacts(group)
    outcomes = await _take_steps(job, group, automation)
    failed = [(run["_id"], o) for run, o in zip(group, outcomes, strict=True) if isinstance(o, BaseException)]
    # a run left out did not move: another worker holds it (or moved it first) and goes on from there
    moved = await run_store.transition_many(job.db, [(run, runs.transition(run, o))
                                                     for run, o in zip(group, outcomes, strict=True)
                                                     if isinstance(o, Move)], automation)
    before = {run["_id"]: run for run in group}
    job.counts.count_moves((before[run["_id"]], run) for run in moved)
    return failed + await _advance_groups(job, moved, steps_left - 1)


async def _note_errors(job: JobView, failed: Failures) -> None:
    for run_id, error in failed:
        log.error("run %s: %r", run_id, error)
        if await run_store.note_engine_error(job.db, run_id, repr(error)[:500], MAX_ENGINE_ERRORS):
            job.counts.count_ended("failed")


def _movable(run: dict) -> bool:
    """Not ended, paused nor waiting (the scheduler brings a waiting run back when due)."""
    return run["status"] == "active" and run["phase"] in ("ready", "due")


async def _automation_running(job: JobView, group: list[dict]) -> dict | None:
    """The group's automation when it is active; the runs of a deleted one are cancelled,
    of a paused one paused (None for both)."""
    automation = job.automations.get(group[0]["automation_id"])
    if automation is None or automation["deleted"]:
        for run in group:
            if await run_store.cancel(job.db, run, "the automation was deleted"):
                job.counts.count_ended("cancelled")
        return None
    if automation["status"] != "active":
        for run in group:
            await run_store.pause_one(job.db, run)
        return None
    return automation


async def _take_steps(job: JobView, group: list[dict], automation: dict) -> list[Move | BaseException | None]:
    """The step the group's runs are at, taken for each (in the group's order): a Move,
    None when another worker holds the run, or what it raised."""
    at = group[0]
    step = next((s for s in automation["steps"] if s["id"] == at["step_id"]), None)
    if step is None:  # removed while these runs were on their way to it
        return [Move(entry({"id": at["step_id"], "step_type": "removed"}, "step_removed"),
                     step_id=_surviving(automation, at["step_id"]), passed=False) for _ in group]
    looping = Stop("failed", f"{runs.MAX_HOPS_WITHOUT_WAIT} steps in a row without a wait: the branches loop")
    outcomes: dict[str, Move | BaseException | None] = {
        r["_id"]: _stopped(step, looping) for r in group if r.get("hops", 0) >= runs.MAX_HOPS_WITHOUT_WAIT}
    rest = [r for r in group if r["_id"] not in outcomes]
    if at["phase"] != "due" and step["step_type"] in GROUP_KINDS:
        taken = await GROUP_KINDS[step["step_type"]](job, rest, step, automation)
        outcomes.update({r["_id"]: _stopped(step, t) if isinstance(t, Stop) else t
                         for r, t in zip(rest, taken, strict=True)})
    else:
        each = await asyncio.gather(*(_take_step(job, r, step, automation) for r in rest), return_exceptions=True)
        outcomes.update({r["_id"]: t for r, t in zip(rest, each, strict=True)})
    return [outcomes[r["_id"]] for r in group]


async def _take_step(job: JobView, run: dict, step: dict, automation: dict) -> Move | None:
    try:
        contact = await job.contact(run)
        if run["phase"] == "due":
            return await _wait_over(job, run, step, automation, contact)
        if step["step_type"] in CHANGES_CONTACT:
            job.contact_cache.pop(run["_id"], None)
        return await STEP_KINDS[step["step_type"]](job, run, step, automation, contact)
    except Stop as stop:
        return _stopped(step, stop)


async def _wait_over(job: JobView, run: dict, step: dict, automation: dict, contact: dict) -> Move | None:
    """The scheduler found the run due: a delay or event wait ran out, or a webhook
    retry (or an attempt cut by a crash) is due."""
    if step["step_type"] == "webhook":
        return await webhook(job, run, step, automation, contact)
    if step["step_type"] == "wait_for_event":
        return _event_wait_timed_out(step, automation["steps"])
    return Move(entry(step, "waited"), step_id=step_rules.step_after(automation["steps"], step["id"]))


def _event_wait_timed_out(step: dict, steps: list[dict]) -> Move:
    config = step["config"]
    action = config["timeoutAction"]
    following = {"continue": lambda: step_rules.step_after(steps, step["id"]),
                 "skip": lambda: step_rules.step_after(steps, step["id"], skip=1),
                 "branch": lambda: step_rules.branch_or_next(steps, step["id"],
                                                             config["timeoutBranchStepId"])}[action]()
    return Move(entry(step, "timed_out", f"no {config['eventType']} in time; {action}"), step_id=following)


def _surviving(automation: dict, step_id: str) -> str | None:
    """Where a run at a removed step goes: the removed step's successor, followed while that
    was removed too (automations keep `removed_steps`: id → successor at removal)."""
    removed, seen = automation.get("removed_steps") or {}, set()
    while step_id in removed and step_id not in seen:
        seen.add(step_id)
        step_id = removed[step_id]
        if step_id is None or step_rules.position_of(automation["steps"], step_id) is not None:
            return step_id
    return None


def _stopped(step: dict, stop: Stop) -> Move:
    return Move(entry(step, stop.status, stop.reason), status=stop.status, passed=False, error=stop.reason)
