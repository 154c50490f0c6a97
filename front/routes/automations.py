"""Automations: flows of steps run for each contact a trigger brings in
(docs/automations.md). The engine is pipelines/workflows/advance_automation_runs.py; triggers are read
from the outbox by pipelines/workflows/automation_triggers.py; step and trigger rules are
pipelines/automations/steps.py and pipelines/automations/triggers.py."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints
from quart import Blueprint

from actors.runtime import publisher
from mongo import automation_runs as run_store
from mongo import automations as automation_store
from pipelines import views
from pipelines.automations import runs as run_rules
from pipelines.automations import steps as step_rules
from pipelines.automations import triggers as trigger_rules
from pipelines.automations.triggers import TRIGGER_TYPES
from pipelines.core.clock import now_iso
from pipelines.core.errors import Conflict, ValidationFailed
from pipelines.workflows import manage_automations

from ..audience import contact_or_404
from ..automation_checks import (
    build_steps,
    check_references,
    check_runnable,
    checked_trigger,
    referring_step,
    successors_of_removed,
)
from ..commerce_types import Metadata
from ..lookup import found, no_such, owned
from ..pagination import PageQuery, paged
from ..resource_routes import list_route
from ..responses import one
from ..runtime import caller, db
from ..types import EmailAddress, FreeJson, Id, Strict
from ..validation import body, query

bp = Blueprint("automations", __name__, url_prefix="/api/v1")

AutomationName = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
StepId = Annotated[str, StringConstraints(pattern=step_rules.STEP_ID.pattern)]
StepType = Literal[step_rules.STEP_TYPES]
# A step's config or a trigger's trigger_config: which fields each type takes is said per
# type (the models' oneOf); their values are JSON values (no integer beyond 64 bits)
Config = Annotated[dict[str, Any], FreeJson()]
CONFIG_HELP = ("The step type's settings (docs/automations.md, Config, has the table). Omitted fields take the "
               "type's defaults on create and keep their value on update.")


def _step_schemas() -> list[dict]:
    """One alternative per step type: the config fields it takes (their values are checked
    by pipelines/automations/steps.py, described in CONFIG_HELP and docs/automations.md)."""
    return [{"properties": {"step_type": {"const": step_type}, "config": {"anyOf": [
        {"type": "object", "additionalProperties": False,
         "properties": {name: {} for name in step_rules.config_fields(step_type)}}, {"type": "null"}]}}}
        for step_type in step_rules.STEP_TYPES]


class StepIn(Strict):
    model_config = ConfigDict(json_schema_extra={"oneOf": _step_schemas()})
    id: StepId | None = Field(None, description="Optional id of your own (1-64 letters, digits, _ or -), so "
                                                "branches can name steps created in the same request.")
    step_type: StepType
    config: Config | None = Field(None, description=CONFIG_HELP)


def _trigger_schemas() -> list[dict]:
    """One alternative per trigger type: its trigger_config (null where nothing is required)."""
    out = []
    for trigger_type in TRIGGER_TYPES:
        config = trigger_rules.config_schema(trigger_type)
        alternative = {"properties": {"trigger_type": {"const": trigger_type}, "trigger_config": (
            config if config["required"] else {"anyOf": [config, {"type": "null"}]})}}
        if config["required"]:
            alternative["required"] = ["trigger_config"]
        out.append(alternative)
    return out


class CreateAutomation(Strict):
    # Each trigger type's trigger_config, said in the document too (front/automation_checks.py
    # checks the ids it names against the workspace)
    model_config = ConfigDict(json_schema_extra={"oneOf": _trigger_schemas()})
    name: AutomationName
    trigger_type: Literal[TRIGGER_TYPES]
    trigger_config: Config | None = Field(None, description=(
        "Per trigger type (docs/automations.md, Triggers); `reentry`: never (default), after_exit, always."))
    steps: Annotated[list[StepIn], Field(max_length=step_rules.MAX_STEPS)] = Field(default_factory=list)


class UpdateAutomation(Strict):
    name: AutomationName = None
    status: Literal["draft", "active", "paused"] = Field(None, description=(
        "draft → active, active → paused, paused → active; anything else is 409 conflict."))
    trigger_type: Literal[TRIGGER_TYPES] = None
    trigger_config: Config | None = None


class AddStep(Strict):
    model_config = ConfigDict(json_schema_extra={"oneOf": _step_schemas()})
    id: StepId | None = None
    step_type: StepType
    config: Config | None = Field(None, description=CONFIG_HELP)
    position: Annotated[int, Field(ge=0)] | None = Field(None, description="0-based; default: after the last step.")


class BatchStep(Strict):
    id: StepId | None = Field(None, description="An existing step keeps its id (runs at it stay there); "
                                                "without id (or a new one) the step is created.")
    step_type: StepType | None = Field(None, description="Required for a new step.")
    config: Config | None = Field(None, description=CONFIG_HELP)


class ReplaceSteps(Strict):
    steps: Annotated[list[BatchStep], Field(max_length=step_rules.MAX_STEPS, description=(
        "The automation's whole new step list, in order. Steps left out are removed: runs at one "
        "move on to the next step that remains."))]


class UpdateStep(Strict):
    step_type: StepType = None
    config: Config | None = Field(None, description=CONFIG_HELP)
    position: Annotated[int, Field(ge=0)] = Field(None, description="Move the step to this 0-based position.")


class TriggerRun(Strict):
    contact_id: Id | None = Field(None, description="The contact, by id (or give email).")
    email: EmailAddress | None = Field(None, description="The contact, by address (or give contact_id).")
    trigger_data: Metadata | None = Field(None, description="Kept on the run; its keys are merge tags in the "
                                                            "run's emails and webhook bodies.")


class AutomationQuery(PageQuery):
    status: Literal["draft", "active", "paused"] | None = None


class RunQuery(PageQuery):
    status: Literal[run_rules.STATUSES] | None = None


def _steps_path(index: int) -> str:
    return f"steps[{index}]"


async def _detail(doc: dict) -> dict:
    stats = await automation_store.run_stats(db(), doc["_id"])
    out = views.automation(doc)
    by_status = stats["by_status"]
    out["stats"] = {**{s: by_status.get(s, 0) for s in run_rules.STATUSES}, "total": sum(by_status.values())}
    for step in out["steps"]:
        step["stats"] = {"at": stats["at"].get(step["id"], 0), "passed": stats["passed"].get(step["id"], 0),
                         "failed": stats["failed_at"].get(step["id"], 0)}
    return out


async def _save_steps(doc: dict, steps: list[dict], path_of) -> dict:
    """Store a new step list (checked against the automation's status), and move the runs
    at steps that are gone."""
    if doc["status"] != "draft":
        check_runnable(steps, path_of)
    await check_references(steps, path_of, doc["_id"], unchanged=doc["steps"])
    return await manage_automations.save_steps(db(), publisher(), doc, steps,
                                               successors_of_removed(doc["steps"], steps))


list_route(bp, "/automations", "list_automations", AutomationQuery, automation_store.page, by=["status"],
           view=views.automation)


@bp.post("/automations")
@body(CreateAutomation)
async def create_automation(data: CreateAutomation):
    """A new automation in status draft; answers it with its steps."""
    who = caller()
    trigger_config = await checked_trigger(data.trigger_type, data.trigger_config)
    steps = build_steps([s.model_dump(exclude_none=True) for s in data.steps], _steps_path)
    await check_references(steps, _steps_path, None)
    doc = await manage_automations.create(db(), who.workspace_id, name=data.name, trigger_type=data.trigger_type,
                                          trigger_config=trigger_config, steps=steps, key_id=who.key_id,
                                          sandbox=who.sandbox)
    return one(await _detail(doc), 201)


@bp.get("/automations/<automation_id>")
async def get_automation(automation_id: str):
    """The automation, its steps in order, and run statistics (per status; per step: at, passed, failed)."""
    return one(await _detail(await owned(automation_store, automation_id, "automation")))


_STATUS_MOVES = {("draft", "active"), ("active", "paused"), ("paused", "active")}


@bp.patch("/automations/<automation_id>")
@body(UpdateAutomation)
async def update_automation(automation_id: str, data: UpdateAutomation):
    doc = await owned(automation_store, automation_id, "automation")
    for field in ("name", "status", "trigger_type"):
        if field in data.model_fields_set and getattr(data, field) is None:
            raise ValidationFailed(f"{field}: must not be null.", path=field)
    changes = data.model_dump(include=data.model_fields_set - {"trigger_config"})
    if "trigger_type" in changes or "trigger_config" in data.model_fields_set:
        trigger_type = changes.get("trigger_type", doc["trigger_type"])
        given = data.trigger_config if "trigger_config" in data.model_fields_set else None
        changes["trigger_config"] = await checked_trigger(trigger_type, given)
    status = changes.get("status")
    if status == doc["status"]:
        del changes["status"]
    elif status is not None:
        if (doc["status"], status) not in _STATUS_MOVES:
            raise Conflict(f"An automation cannot go from {doc['status']} to {status}.")
        if status == "active":
            check_runnable(doc["steps"], _steps_path)
            await check_references(doc["steps"], _steps_path, doc["_id"])
            if doc["status"] == "draft":
                changes["activated_at"] = now_iso()
    if not changes:
        return one(await _detail(doc))
    return one(await _detail(await manage_automations.update(db(), doc, changes)))


@bp.delete("/automations/<automation_id>")
async def delete_automation(automation_id: str):
    """Soft delete: gone from every read; its active and paused runs are cancelled."""
    cancelled = await found(manage_automations.delete(db(), caller().workspace_id, automation_id),
                            no_such("automation"))
    return one({"id": automation_id, "deleted": True, "runs_cancelled": cancelled})


@bp.post("/automations/<automation_id>/steps")
@body(AddStep)
async def add_step(automation_id: str, data: AddStep):
    """Insert a step at `position` (default: last); answers the step."""
    doc = await owned(automation_store, automation_id, "automation")
    entries = [{"id": s["id"], "step_type": s["step_type"], "config": s["config"]} for s in doc["steps"]]
    position = len(entries) if data.position is None else min(data.position, len(entries))
    if data.id is not None and any(s["id"] == data.id for s in doc["steps"]):
        raise ValidationFailed(f"id: step id {data.id!r} is used already.", path="id")
    entries.insert(position, data.model_dump(exclude={"position"}, exclude_none=True))

    def path_of(index: int) -> str:  # the new step's fields are the body's own; others are steps[i]
        return "" if index == position else f"steps[{index}]"
    steps = build_steps(entries, path_of, doc["steps"])
    saved = await _save_steps(doc, steps, path_of)
    return one(views.step(saved["steps"][position], position), 201)


@bp.put("/automations/<automation_id>/steps")
@body(ReplaceSteps)
async def replace_steps(automation_id: str, data: ReplaceSteps):
    """Batch update: the whole step list in its new order (reorder, update configs, add, and
    remove by leaving out). Answers the automation."""
    doc = await owned(automation_store, automation_id, "automation")
    steps = build_steps([s.model_dump(exclude_none=True) for s in data.steps], _steps_path, doc["steps"])
    saved = await _save_steps(doc, steps, _steps_path)
    return one(await _detail(saved))


async def _step_position(doc: dict, step_id: str) -> int:
    return await found(step_rules.position_of(doc["steps"], step_id), "No such step in this automation.")


@bp.patch("/automations/<automation_id>/steps/<step_id>")
@body(UpdateStep)
async def update_step(automation_id: str, step_id: str, data: UpdateStep):
    """Change a step's type (its config starts from the new type's defaults), its config
    (merged over the current one) or its position. Runs at the step stay at it."""
    doc = await owned(automation_store, automation_id, "automation")
    position = await _step_position(doc, step_id)
    entries = [{"id": s["id"], "step_type": s["step_type"]} for s in doc["steps"]]
    entries[position] = {"id": step_id, **data.model_dump(include=data.model_fields_set - {"position"},
                                                          exclude_none=True)}
    entries[position].setdefault("step_type", doc["steps"][position]["step_type"])
    if "config" in data.model_fields_set and data.config is None:
        raise ValidationFailed("config: must be an object.", path="config")
    target = position if data.position is None else min(data.position, len(entries) - 1)
    entries.insert(target, entries.pop(position))
    def path_of(index: int) -> str:
        return "" if index == target else f"steps[{index}]"
    steps = build_steps(entries, path_of, doc["steps"])
    saved = await _save_steps(doc, steps, path_of)
    return one(views.step(saved["steps"][target], target))


@bp.delete("/automations/<automation_id>/steps/<step_id>")
async def delete_step(automation_id: str, step_id: str):
    """Remove a step; the others close up. Runs at it move on to the step that followed."""
    doc = await owned(automation_store, automation_id, "automation")
    await _step_position(doc, step_id)
    remaining = [s for s in doc["steps"] if s["id"] != step_id]
    referring = referring_step(remaining, {step_id})
    if referring:
        index, field, _ = referring
        raise Conflict(f"Step {remaining[index]['id']!r} (position {index}) branches to this step with {field}; "
                       "point it elsewhere first.")
    await _save_steps(doc, remaining, _steps_path)
    return one({"id": step_id, "deleted": True})


@bp.post("/automations/<automation_id>/trigger")
@body(TriggerRun)
async def trigger(automation_id: str, data: TriggerRun):
    """Start a run for one contact now (any trigger type; re-entry rules apply). 201 with the run;
    404 contact_not_found; 409 conflict when the automation is not active or re-entry refuses."""
    doc = await owned(automation_store, automation_id, "automation")
    if (data.contact_id is None) == (data.email is None):
        raise ValidationFailed("Give exactly one of contact_id or email.",
                               path="email" if data.email is not None else "contact_id")
    contact = await contact_or_404(contact_id=data.contact_id, email=data.email, email_path="email")
    run = await manage_automations.start_run(db(), publisher(), doc, contact, data.trigger_data or {})
    return one(views.run(run, doc["steps"]), 201)


@bp.get("/automations/<automation_id>/runs")
@query(RunQuery)
async def list_runs(automation_id: str, params: RunQuery):
    """The automation's runs, newest first: contact, status, current step, history, next wake-up, error."""
    doc = await owned(automation_store, automation_id, "automation")
    listed = await run_store.page(db(), automation_id, params.status, limit=params.limit, offset=params.offset)
    return paged(listed, params, lambda r: views.run(r, doc["steps"]))


@bp.post("/automations/<automation_id>/runs/<run_id>/cancel")
async def cancel_run(automation_id: str, run_id: str):
    """An active or paused run → cancelled; any other status is 409 conflict."""
    doc = await owned(automation_store, automation_id, "automation")
    run = await found(manage_automations.cancel_run(db(), doc, run_id), "No such run of this automation.")
    return one(views.run(run, doc["steps"]))
