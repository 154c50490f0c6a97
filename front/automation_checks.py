"""What the automation blueprint checks beyond a body's shape: step configs per step type
(pipelines.automations.steps) and the things they name — a template, a static list,
another automation, a webhook target the outbound guard accepts, other steps of the same
automation — and, once an automation may run, that every step is complete. Each problem answers with the path of
the offending config field: 404 not_found when it names nothing of this workspace (a
missing id, or another workspace's: every cross-reference answers so), 400
validation_error for anything else (a dynamic list where a static one is needed, a flow
moving to itself, an incomplete step)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mongo import automations as automation_store
from mongo import campaigns as campaign_store
from mongo import forms as form_store
from mongo import lists as list_store
from mongo import tags as tag_store
from mongo import templates as template_store
from pipelines.automations import steps as steps_rules
from pipelines.automations import triggers as trigger_rules
from pipelines.automations.steps import field_path
from pipelines.core.errors import NotFound, ValidationFailed
from pipelines.core.targets import target_problem

from .runtime import caller, db, settings

PathOf = Callable[[int], str]  # step index → the path prefix of its fields ("" for a body's own step)


def _fail(path: str, message: str) -> None:
    raise ValidationFailed(f"{path}: {message}", path=path)


def _missing(path: str, what: str, ref: str) -> None:
    raise NotFound(f"{path}: no {what} {ref!r} in this workspace.", path=path)


async def _exists(store, what: str, ref: str, path: str) -> None:
    if await store.get(db(), caller().workspace_id, ref) is None:
        _missing(path, what, ref)


def build_steps(entries: list[dict], path_of: PathOf, current: list[dict] | None = None) -> list[dict]:
    """Steps from request entries `{id?, step_type?, config?}` in order. An entry naming an
    existing step (`current`) updates it: its config is merged over the stored one while the
    type stays, over the new type's defaults when the type changes. New steps get an id
    unless they bring their own (so branches can name steps created in the same request)."""
    existing = {s["id"]: s for s in current or []}
    seen: set[str] = set()
    out = []
    for index, entry in enumerate(entries):
        where = path_of(index)
        step_id = entry.get("id")
        if step_id is not None and not steps_rules.STEP_ID.match(step_id):
            _fail(field_path(where, "id"), "step ids are 1-64 letters, digits, _ or -.")
        before = existing.get(step_id) if step_id else None
        step_type = entry.get("step_type") or (before or {}).get("step_type")
        if step_type is None:
            _fail(field_path(where, "step_type"), "Field required.")
        base = before["config"] if before and before["step_type"] == step_type else None
        config = steps_rules.normalize_config(step_type, entry.get("config"), field_path(where, "config"),
                                              base=base)
        step_id = step_id or automation_store.new_step_id()
        if step_id in seen:
            _fail(field_path(where, "id"), f"step id {step_id!r} is used twice.")
        seen.add(step_id)
        out.append({"id": step_id, "step_type": step_type, "config": config})
    if len(out) > steps_rules.MAX_STEPS:
        _fail("steps", f"at most {steps_rules.MAX_STEPS} steps.")
    steps_rules.check_branches(out, path_of)
    return out


async def check_references(steps: list[dict], path_of: PathOf, automation_id: str | None,
                           unchanged: list[dict] | None = None) -> None:
    """The templates, lists, automations, condition tags and lists, and webhook targets that
    steps name (skipping the steps in `unchanged`, as stored, so an edit is not refused for
    another step's sake)."""
    kept = {(s["id"], s["step_type"], repr(s["config"])) for s in unchanged or []}
    for index, step in enumerate(steps):
        if (step["id"], step["step_type"], repr(step["config"])) in kept:
            continue
        config, where = step["config"], field_path(path_of(index), "config")
        kind = step["step_type"]
        if kind == "email" and config["templateId"]:
            await _exists(template_store, "template", config["templateId"], f"{where}.templateId")
        elif kind == "condition" and config["field"] in ("tags", "lists") and config["value"] != "":
            await _member_ref(config["field"], config["value"], f"{where}.value")
        elif kind in ("add_to_list", "remove_from_list") and config["listId"]:
            await _static_list(config["listId"], f"{where}.listId")
        elif kind == "move_to_flow" and config["targetFlowId"]:
            if config["targetFlowId"] == automation_id:
                _fail(f"{where}.targetFlowId", "must name another automation, not this one.")
            await _exists(automation_store, "automation", config["targetFlowId"], f"{where}.targetFlowId")
        elif kind == "webhook" and config["url"]:
            problem = target_problem(config["url"], settings().allow_private_targets)
            if problem:
                _fail(f"{where}.url", f"the URL {problem}; the outbound guard refuses it.")


async def _member_ref(field: str, ref, path: str) -> None:
    """A condition on `tags` or `lists` names a tag, or a static list, of this workspace
    (as a segment rule's must: dynamic membership is not stored on contacts)."""
    if not isinstance(ref, str):
        _fail(path, f"a condition on {field} names a {field[:-1]} id.")
    if field == "tags":
        await _exists(tag_store, "tag", ref, path)
    else:
        await _static_list(ref, path)


async def _static_list(list_id: str, path: str) -> dict:
    found = await list_store.get(db(), caller().workspace_id, list_id)
    if found is None:
        _missing(path, "list", list_id)
    if found["type"] != "static":
        _fail(path, "must be a static list (dynamic lists have no members to add or remove).")
    return found


def check_runnable(steps: list[dict], path_of: PathOf) -> None:
    """An active or paused automation's steps must all be complete."""
    for index, step in enumerate(steps):
        problem = steps_rules.runnable_problem(step)
        if problem:
            field, why = problem
            _fail(field_path(path_of(index), f"config.{field}"), why)


async def checked_trigger(trigger_type: str, config: Any, path: str = "trigger_config") -> dict:
    """The trigger_config complete, and the list, tag, campaign, template or form it names here."""
    out = trigger_rules.normalize_trigger_config(trigger_type, config, path)
    if "list_id" in out:
        await _static_list(out["list_id"], f"{path}.list_id")
    for name, store, what in (("tag_id", tag_store, "tag"), ("campaign_id", campaign_store, "campaign"),
                              ("template_id", template_store, "template"), ("form_id", form_store, "form")):
        if out.get(name):
            await _exists(store, what, out[name], f"{path}.{name}")
    return out


def successors_of_removed(before: list[dict], after: list[dict]) -> dict[str, str | None]:
    """For each step of `before` missing from `after`: the next step of `before` that
    survives (None when none does): where runs at a removed step go."""
    kept = {s["id"] for s in after}
    out: dict[str, str | None] = {}
    for index, step in enumerate(before):
        if step["id"] not in kept:
            out[step["id"]] = next((s["id"] for s in before[index + 1:] if s["id"] in kept), None)
    return out


def referring_step(steps: list[dict], removed: set[str]) -> tuple[int, str, str] | None:
    """(position, field, target) of a surviving step branching to a removed one."""
    for index, step in enumerate(steps):
        if step["id"] in removed:
            continue
        for field, target in steps_rules.branch_targets(step):
            if target in removed:
                return index, field, target
    return None
