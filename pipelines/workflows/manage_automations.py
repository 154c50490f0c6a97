"""An automation's commands (POST, PATCH and DELETE /automations…, its steps, starting and
cancelling runs). Every change of an automation is guarded on the version the route read:
a write that came first makes it 409, to be read again. Runs a change readies are handed to
the engine (the `automations` actor); stored is enough, so a failed hand-off is left to the
scheduler, which hands over every run whose hand-off grace is out."""

from __future__ import annotations

import logging
import uuid

from pymongo.asynchronous.database import AsyncDatabase

from mongo import automation_runs, automations
from pipelines.automations import runs as run_rules
from pipelines.core.errors import Conflict, one_line
from pipelines.workflows.publisher import Publisher

log = logging.getLogger("postroom.front")

# Tries at cancelling a run that a worker keeps moving between our read and our write.
CANCEL_TRIES = 5


def changed_meanwhile() -> Conflict:
    return Conflict("The automation changed while this request was applied; read it again and retry.")


async def create(db: AsyncDatabase, workspace_id: str, *, name: str, trigger_type: str, trigger_config: dict,
                 steps: list[dict], key_id: str, sandbox: bool) -> dict:
    """A new automation in status draft (its trigger and steps checked by the route)."""
    doc = automations.new_document(workspace_id, name=name, trigger_type=trigger_type,
                                   trigger_config=trigger_config, steps=steps, key_id=key_id, sandbox=sandbox)
    return await automations.insert(db, doc)


async def update(db: AsyncDatabase, automation: dict, changes: dict) -> dict:
    """The automation after `changes`; a status change pauses or resumes its runs (the
    route allowed the move). 409 when another write came first."""
    saved = await automations.update(db, automation["workspace_id"], automation["_id"], automation["version"],
                                     changes)
    if saved is None:
        raise changed_meanwhile()
    status = changes.get("status")
    if status == "paused":
        await automation_runs.pause_all(db, automation["_id"])
    elif status == "active" and automation["status"] == "paused":
        await automation_runs.resume_all(db, automation["_id"])
    return saved


async def delete(db: AsyncDatabase, workspace_id: str, automation_id: str) -> int | None:
    """Soft delete, gone from every read: how many of its active and paused runs were
    cancelled; None when there was no such automation."""
    if await automations.soft_delete(db, workspace_id, automation_id) is None:
        return None
    return await automation_runs.cancel_all(db, automation_id, "the automation was deleted")


async def save_steps(db: AsyncDatabase, publisher: Publisher, automation: dict, steps: list[dict],
                     successors: dict[str, str | None]) -> dict:
    """Store a new (checked) step list; the runs at removed steps move to their `successors`
    (removed step id → the next surviving step) and go on at once."""
    removed = {**automation.get("removed_steps", {}), **successors}
    saved = await automations.update(db, automation["workspace_id"], automation["_id"], automation["version"],
                                     {"steps": steps, "removed_steps": removed})
    if saved is None:
        raise changed_meanwhile()
    if successors:
        for run_id in await automation_runs.move_off_steps(db, saved, successors):
            await _hand_to_engine(publisher, {"_id": run_id, "status": "active"})
    return saved


async def start_run(db: AsyncDatabase, publisher: Publisher, automation: dict, contact: dict,
                    trigger_data: dict) -> dict:
    """A run for `contact` started now; 409 when the automation is not active or its
    re-entry rule refuses."""
    if automation["status"] != "active":
        raise Conflict(f"The automation is {automation['status']}; only an active automation starts runs.")
    [started] = await automation_runs.start_many(db, [automation_runs.StartRequest(
        automation=automation, contact=contact, source=f"api:{uuid.uuid4().hex}",
        trigger={"type": "api", "data": trigger_data})])
    if not started.created:
        raise Conflict(f"The contact is in this automation already or has been through it "
                       f"(reentry: {automation['trigger_config'].get('reentry')}).")
    assert started.run is not None, "created"
    await _hand_to_engine(publisher, started.run)
    return started.run


async def cancel_run(db: AsyncDatabase, automation: dict, run_id: str) -> dict | None:
    """An active or paused run → cancelled; None when the automation has no such run, 409
    when the run is in another status."""
    for _ in range(CANCEL_TRIES):  # a worker may move the run between our read and our write: read again
        run = await automation_runs.get(db, automation["workspace_id"], automation["_id"], run_id)
        if run is None:
            return None
        if run["status"] not in run_rules.OPEN_STATUSES:
            raise Conflict(f"The run is {run['status']}; only an active or paused run can be cancelled.")
        if await automation_runs.cancel(db, run, "cancelled through the API"):
            [run] = await automation_runs.load(db, [run_id])
            return run
    raise changed_meanwhile()


async def _hand_to_engine(publisher: Publisher, run: dict) -> None:
    if run["status"] != "active":
        return
    try:
        await publisher.advance_runs([run["_id"]])
    except Exception as error:  # noqa: BLE001 - stored is enough: the scheduler hands it over
        log.warning("run %s stored; the scheduler will hand it to the engine (%s)", run["_id"], one_line(error))
