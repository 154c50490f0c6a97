"""Automation runs moved forward step by step (the `automations` queue's jobs, run by
actors/automations.py).

A job names runs; each is loaded and advanced until it waits (a delay, an event, a webhook
retry), ends, or has taken MAX_STEPS_PER_JOB steps (then it is enqueued again). Every step
ends in one compare-and-set transition on the run's `version` (mongo.automation_runs), so a
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
from pipelines.automations.runs import Move, entry
from pipelines.core.settings import Settings
from pipelines.workflows.publisher import Publisher
from pipelines.workflows.take_automation_step import CHANGES_CONTACT, STEP_KINDS, HttpRequest, JobView, Stop, webhook

log = logging.getLogger("postroom.automations")

MAX_STEPS_PER_JOB = 50           # steps one job takes for one run before handing it on
# Unexpected errors advancing one run before it is failed with the last of them.
MAX_ENGINE_ERRORS = 10


async def advance_runs(db: AsyncDatabase, settings: Settings, publisher: Publisher, http: HttpRequest,
                       run_ids: Sequence[str]) -> None:
    """Each run as far as it goes in this job. A run that raised has its error noted (failed
    after MAX_ENGINE_ERRORS) and the job raises, to be retried: runs that moved meanwhile
    are found where they are."""
    loaded = await run_store.load(db, list(run_ids))
    job = JobView(db, settings, publisher, http, await load_automations(db, list({r["automation_id"] for r in loaded})))
    failed = await _advance_each(job, loaded)
    await _note_errors(db, failed)
    if failed:
        raise failed[0][1]


async def _advance_each(job: JobView, loaded: list[dict]) -> list[tuple[str, BaseException]]:
    """Every run on its own: one run's error leaves the others' progress standing."""
    results = await asyncio.gather(*(_advance(job, run) for run in loaded), return_exceptions=True)
    return [(run["_id"], error) for run, error in zip(loaded, results, strict=True) if isinstance(error, BaseException)]


async def _note_errors(db: AsyncDatabase, failed: list[tuple[str, BaseException]]) -> None:
    for run_id, error in failed:
        log.error("run %s: %r", run_id, error)
        await run_store.note_engine_error(db, run_id, repr(error)[:500], MAX_ENGINE_ERRORS)


def _movable(run: dict) -> bool:
    """Not ended, paused nor waiting (the scheduler brings a waiting run back when due)."""
    return run["status"] == "active" and run["phase"] in ("ready", "due")


async def _advance(job: JobView, run: dict) -> None:
    for _ in range(MAX_STEPS_PER_JOB):
        if not _movable(run):
            return
        automation = await _automation_running(job, run)
        if automation is None:
            return
        move = await _take_step(job, run, automation)
        if move is None:
            return  # another worker holds the run
        moved = await _record(job, run, move, automation)
        if moved is None:
            return  # another worker moved it first; it goes on from there
        run = moved
    if _movable(run):
        await job.publisher.advance_runs([run["_id"]])  # its share of this job is used up: on to another


async def _automation_running(job: JobView, run: dict) -> dict | None:
    """The run's automation when it is active; a run of a deleted one is cancelled, of a
    paused one paused (None for both)."""
    automation = job.automations.get(run["automation_id"])
    if automation is None or automation["deleted"]:
        await run_store.cancel(job.db, run, "the automation was deleted")
        return None
    if automation["status"] != "active":
        await run_store.pause_one(job.db, run)
        return None
    return automation


async def _record(job: JobView, run: dict, move: Move, automation: dict) -> dict | None:
    """The run after the move's transition, or None when another worker moved it first."""
    update = runs.transition(run, move)
    if not await run_store.transition(job.db, run, update, automation):
        return None
    return runs.applied(run, update)


async def _take_step(job: JobView, run: dict, automation: dict) -> Move | None:
    step = next((s for s in automation["steps"] if s["id"] == run["step_id"]), None)
    if step is None:  # removed while this run was on its way to it
        return Move(entry({"id": run["step_id"], "step_type": "removed"}, "step_removed"),
                    step_id=_surviving(automation, run["step_id"]), passed=False)
    if run.get("hops", 0) >= runs.MAX_HOPS_WITHOUT_WAIT:
        return _stopped(step, Stop("failed", f"{runs.MAX_HOPS_WITHOUT_WAIT} steps in a row without a wait: "
                                             "the branches loop"))
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
