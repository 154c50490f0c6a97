"""The `automations` queue: runs moved forward step by step.

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
hands due runs back to this queue (ops/automation_jobs.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import dramatiq

from mongo import automation_runs as run_store
from mongo import campaign_audience, contacts, lists, memberships, messages, send_limits, suppressions, tags
from mongo import templates, workspaces
from mongo.automations import load_many as load_automations
from pipelines.automations import runs
from pipelines.automations import steps as step_rules
from pipelines import views
from pipelines.messages import delivery_status
from pipelines.adapters import http_client as outbound_http
from pipelines.messages import throttle
from pipelines.automations.runs import Move, entry
from pipelines.core.clock import now_iso, utcnow
from pipelines.core.errors import PostroomError
from pipelines.templates.personalise import contact_fields
from pipelines.workflows import start_campaign

from . import runtime

log = logging.getLogger("postroom.automations")

ADVANCE_CHUNK = 20               # runs per job
MAX_STEPS_PER_JOB = 50           # steps one job takes for one run before handing it on
WEBHOOK_ATTEMPTS = 4             # the first and three retries, then the run fails
WEBHOOK_RETRY_SECONDS = (30, 120, 600)  # × POSTROOM_WEBHOOK_RETRY_SCALE
WEBHOOK_TIMEOUT_SECONDS = 10.0
# The claim of a webhook attempt outlasts the call; past it the scheduler takes the worker for dead.
WEBHOOK_LEASE_SECONDS = WEBHOOK_TIMEOUT_SECONDS + 20
MAX_ATTRIBUTES = 100
# Unexpected errors advancing one run before it is failed with the last of them.
MAX_ENGINE_ERRORS = 10
TAG_COLOR = "#6366f1"  # a tag a step creates gets the API's default colour


@dramatiq.actor(queue_name="automations", max_retries=20, min_backoff=1000, max_backoff=60_000)
async def advance_runs(run_ids: list[str]) -> None:
    db = runtime.store()
    loaded = await run_store.load(db, run_ids)
    engine = Engine(db, await load_automations(db, list({r["automation_id"] for r in loaded})))
    results = await asyncio.gather(*(engine.advance(run) for run in loaded), return_exceptions=True)
    failed = [(run["_id"], error) for run, error in zip(loaded, results) if isinstance(error, BaseException)]
    for run_id, error in failed:
        log.error("run %s: %r", run_id, error)
        await run_store.note_engine_error(db, run_id, repr(error)[:500], MAX_ENGINE_ERRORS)
    if failed:  # the job is retried; runs that moved meanwhile are found where they are
        raise failed[0][1]


class Stop(Exception):
    """The run cannot go on: it ends with `status` (failed or cancelled) and `reason`."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


# Steps that change the contact: the next step reads it again.
CHANGES_CONTACT = {"tag", "add_to_list", "remove_from_list", "update_attribute"}


@dataclasses.dataclass
class Engine:
    """One job's view: the automations of its runs, and what its runs share (workspaces,
    senders, templates, tags, each run's contact between steps that do not change it),
    read once per job rather than once per run and step."""
    db: object
    automations: dict[str, dict]
    workspace_cache: dict = dataclasses.field(default_factory=dict)
    sender_cache: dict = dataclasses.field(default_factory=dict)
    template_cache: dict = dataclasses.field(default_factory=dict)
    tag_cache: dict = dataclasses.field(default_factory=dict)
    contact_cache: dict = dataclasses.field(default_factory=dict)

    async def advance(self, run: dict) -> None:
        for _ in range(MAX_STEPS_PER_JOB):
            if run["status"] != "active" or run["phase"] not in ("ready", "due"):
                return  # ended, paused, or waiting: the scheduler brings it back when due
            automation = self.automations.get(run["automation_id"])
            if automation is None or automation["deleted"]:
                await run_store.cancel(self.db, run, "the automation was deleted")
                return
            if automation["status"] != "active":
                await run_store.pause_one(self.db, run)
                return
            move = await self._step(run, automation)
            if move is None:
                return  # another worker holds the run
            update = runs.transition(run, move)
            if not await run_store.transition(self.db, run, update, automation):
                return  # another worker moved it first; it goes on from there
            run = runs.applied(run, update)
        if run["status"] == "active" and run["phase"] in ("ready", "due"):
            await runtime.publisher().advance_runs([run["_id"]])  # its share of this job is used up: on to another

    async def _step(self, run: dict, automation: dict) -> Move | None:
        steps = automation["steps"]
        step = next((s for s in steps if s["id"] == run["step_id"]), None)
        if step is None:  # removed while this run was on its way to it
            successor = _surviving(automation, run["step_id"])
            return Move(entry({"id": run["step_id"], "step_type": "removed"}, "step_removed"),
                        step_id=successor, passed=False)
        if run.get("hops", 0) >= runs.MAX_HOPS_WITHOUT_WAIT:
            return _stopped(step, Stop("failed", f"{runs.MAX_HOPS_WITHOUT_WAIT} steps in a row without a wait: "
                                                 "the branches loop"))
        try:
            contact = await self._contact(run)
            if run["phase"] == "due":
                return await self._wait_over(run, step, automation, contact)
            if step["step_type"] in CHANGES_CONTACT:
                self.contact_cache.pop(run["_id"], None)
            return await EXECUTE[step["step_type"]](self, run, step, automation, contact)
        except Stop as stop:
            return _stopped(step, stop)

    async def _contact(self, run: dict) -> dict:
        if run["_id"] not in self.contact_cache:
            found = await campaign_audience.live_contacts_by_ids(self.db, run["workspace_id"], [run["contact_id"]])
            if not found:
                raise Stop("cancelled", "the contact no longer exists")
            self.contact_cache[run["_id"]] = found[0]
        return self.contact_cache[run["_id"]]

    async def _workspace(self, workspace_id: str) -> dict:
        if workspace_id not in self.workspace_cache:
            self.workspace_cache[workspace_id] = await workspaces.get(self.db, workspace_id)
        if self.workspace_cache[workspace_id] is None:
            raise Stop("failed", "the workspace no longer exists")
        return self.workspace_cache[workspace_id]

    async def _sender(self, workspace: dict) -> dict:
        """The workspace's default sender, resolved as a campaign's is (its verified domains)."""
        if workspace["_id"] not in self.sender_cache:
            try:
                self.sender_cache[workspace["_id"]] = await start_campaign.resolve_sender(
                    self.db, workspace, None, None, None, shared_domain=runtime.settings().shared_domain)
            except PostroomError as error:
                self.sender_cache[workspace["_id"]] = Stop("failed", error.message)
        found = self.sender_cache[workspace["_id"]]
        if isinstance(found, Stop):
            raise found
        return found

    async def _template(self, workspace_id: str, template_id: str) -> dict:
        key = (workspace_id, template_id)
        if key not in self.template_cache:
            self.template_cache[key] = await templates.get(self.db, workspace_id, template_id)
        if self.template_cache[key] is None:
            raise Stop("failed", f"the template {template_id} no longer exists")
        return self.template_cache[key]

    async def _tag(self, workspace_id: str, name: str, create: bool) -> dict | None:
        """The workspace's tag of this name; created (or found created meanwhile) when asked."""
        key = (workspace_id, name.lower())
        if self.tag_cache.get(key) is None:
            found = await tags.find_by_name(self.db, workspace_id, name)
            if found is None and create:
                found = (await tags.create(self.db, workspace_id, name=name, color=TAG_COLOR, description=None)
                         or await tags.find_by_name(self.db, workspace_id, name))
            self.tag_cache[key] = found
        return self.tag_cache[key]

    # -- waits ----------------------------------------------------------------------------------

    async def _wait_over(self, run: dict, step: dict, automation: dict, contact: dict) -> Move | None:
        """The scheduler found the run due: a delay or event wait ran out, or a webhook
        retry (or an attempt cut by a crash) is due."""
        kind, config, steps = step["step_type"], step["config"], automation["steps"]
        if kind == "webhook":
            return await self.webhook(run, step, automation, contact)
        if kind == "wait_for_event":
            action = config["timeoutAction"]
            following = {"continue": lambda: step_rules.step_after(steps, step["id"]),
                         "skip": lambda: step_rules.step_after(steps, step["id"], skip=1),
                         "branch": lambda: step_rules.branch_or_next(steps, step["id"],
                                                                     config["timeoutBranchStepId"])}[action]()
            return Move(entry(step, "timed_out", f"no {config['eventType']} in time; {action}"), step_id=following)
        return Move(entry(step, "waited"), step_id=step_rules.step_after(steps, step["id"]))

    async def delay(self, run, step, automation, contact) -> Move:
        seconds = step_rules.wait_seconds("delay", step["config"])
        wake = runs.now_ms() + int(seconds * 1000)
        return Move(entry(step, "waiting", until=runs.ms_iso(wake)), step_id=step["id"], phase="waiting",
                    wake_ms=wake, passed=False, new_step=False)

    async def wait_for_event(self, run, step, automation, contact) -> Move:
        config = step["config"]
        wake = runs.now_ms() + int(step_rules.wait_seconds("wait_for_event", config) * 1000)
        return Move(entry(step, "waiting", f"for {config['eventType']}", until=runs.ms_iso(wake)),
                    step_id=step["id"], phase="waiting", wake_ms=wake, wait_event=config["eventType"],
                    passed=False, new_step=False)

    # -- steps that change the contact --------------------------------------------------------

    async def condition(self, run, step, automation, contact) -> Move:
        holds = step_rules.condition_holds(contact, step["config"])
        branch = step["config"]["trueBranchStepId" if holds else "falseBranchStepId"]
        return Move(entry(step, "true" if holds else "false"),
                    step_id=step_rules.branch_or_next(automation["steps"], step["id"], branch))

    async def tag(self, run, step, automation, contact) -> Move:
        config, workspace_id = step["config"], run["workspace_id"]
        found = await self._tag(workspace_id, config["tagName"], create=config["action"] == "add")
        if config["action"] == "add":  # the step creates the tag it names when it does not exist
            outcome = await tags.assign(self.db, found, [contact["_id"]])
            done = "tagged" if outcome.changed else "already_tagged"
        elif found is None:
            done = "not_tagged"
        else:
            outcome = await memberships.remove(self.db, workspace_id, "tags", found["_id"], [contact["_id"]])
            done = "untagged" if outcome.changed else "not_tagged"
        return Move(entry(step, done, config["tagName"]), step_id=_next(automation, step))

    async def list_membership(self, run, step, automation, contact) -> Move:
        found = await lists.get(self.db, run["workspace_id"], step["config"]["listId"])
        if found is None:
            raise Stop("failed", f"the list {step['config']['listId']} no longer exists")
        if step["step_type"] == "add_to_list":
            changed = (await lists.add_members(self.db, found, [contact["_id"]], reason="automation")).changed
            done = "added" if changed else "already_member"
        else:
            changed = (await lists.remove_members(self.db, found, [contact["_id"]], reason="automation")).changed
            done = "removed" if changed else "not_member"
        return Move(entry(step, done, found["name"]), step_id=_next(automation, step))

    async def update_attribute(self, run, step, automation, contact) -> Move:
        config = step["config"]
        try:
            outcome = await contacts.update(self.db, run["workspace_id"], contact["_id"], fields={},
                                            set_attributes={config["attributeName"]: config["attributeValue"]},
                                            unset_attributes=[], max_attributes=MAX_ATTRIBUTES)
        except LookupError:
            raise Stop("cancelled", "the contact no longer exists") from None
        if outcome is contacts.Refusal.TOO_MANY_ATTRIBUTES:
            raise Stop("failed", f"attributes: a contact has at most {MAX_ATTRIBUTES} attributes") from None
        return Move(entry(step, "updated", f"{config['attributeName']} = {config['attributeValue']!r}"),
                    step_id=_next(automation, step))

    # -- steps with an outside effect -----------------------------------------------------------

    async def email(self, run, step, automation, contact) -> Move:
        config, workspace_id = step["config"], run["workspace_id"]
        nxt = _next(automation, step)
        if not contact["subscribed"] or contact["bounced"]:
            why = "the contact is unsubscribed" if not contact["subscribed"] else "the contact has bounced"
            return Move(entry(step, "skipped", why), step_id=nxt)
        if await suppressions.suppressed_among(self.db, workspace_id, [contact["email"]]):
            return Move(entry(step, "skipped", "the address is on the suppression list"), step_id=nxt)
        template = await self._template(workspace_id, config["templateId"])
        workspace = await self._workspace(workspace_id)
        sender = await self._sender(workspace)
        settings = runtime.settings()
        message = runs.email_message(run=run, step=step, automation=automation, contact=contact,
                                     template=template, sender=sender, now=now_iso())
        # False: this step ran before and stopped before moving the run on; the same message
        created = await messages.insert_once(self.db, message)
        if created and not message["sandbox"]:
            limit = throttle.monthly_limit(workspace, settings.plan_monthly_email_limit)
            if not await send_limits.charge_plan(self.db, workspace_id, throttle.month_of(utcnow()), 1, limit):
                await messages.apply(self.db, [delivery_status.fail(message["_id"],
                                                                    "the plan's monthly email limit was reached")])
                raise Stop("failed", f"the plan's limit of {limit} emails this month has been reached")
        await runtime.publisher().render([message["_id"]])  # render sends only a still-queued message
        return Move(entry(step, "sent", message_id=message["_id"]), step_id=nxt)

    async def webhook(self, run, step, automation, contact) -> Move | None:
        config, settings = step["config"], runtime.settings()
        attempt = run["attempts"] + 1
        lease = runs.now_ms() + int(WEBHOOK_LEASE_SECONDS * 1000)
        claimed = await run_store.update_guarded(self.db, run, {"phase": "calling", "attempts": attempt,
                                                                "wake_ms": lease})
        if claimed is None:
            return None
        run.update(claimed)  # the transition that follows is guarded on the claim's version
        data = {**contact_fields(contact, contact["email"]), **((run.get("trigger") or {}).get("data") or {}),
                "automation_id": automation["_id"], "run_id": run["_id"]}
        default_body = {"event": "automation.webhook", "automation": {"id": automation["_id"], "name": automation["name"]},
                        "run_id": run["_id"], "step_id": step["id"],
                        "contact": views.contact(contact), "trigger": run["trigger"]}
        body, headers = step_rules.webhook_request(config, data=data, default_body=default_body,
                                                   delivery_id=f"{run['_id']}:{step['id']}:{run['seq']}")
        result = await outbound_http.request(config["method"], config["url"], body, headers,
                                             allow_private=settings.allow_private_targets,
                                             timeout_seconds=WEBHOOK_TIMEOUT_SECONDS)
        record = entry(step, "delivered" if result.ok else "attempt_failed", result.error, attempt=attempt,
                       status_code=result.status_code, duration_ms=result.duration_ms)
        if result.ok:
            return Move(record, step_id=_next(automation, step))
        if attempt < WEBHOOK_ATTEMPTS:
            wake = runs.now_ms() + int(WEBHOOK_RETRY_SECONDS[attempt - 1] * settings.webhook_retry_scale * 1000)
            return Move(record, step_id=step["id"], phase="waiting", wake_ms=wake, attempts=attempt,
                        passed=False, new_step=False)
        return Move(record, status="failed", passed=False,
                    error=f"webhook failed after {attempt} attempts: {result.error}")

    async def move_to_flow(self, run, step, automation, contact) -> Move:
        config = step["config"]
        target = (await load_automations(self.db, [config["targetFlowId"]])).get(config["targetFlowId"])
        if target is None or target["deleted"] or target["workspace_id"] != run["workspace_id"] \
                or target["status"] != "active":
            state = "deleted" if target is None or target["deleted"] else target["status"]
            raise Stop("failed", f"the target automation {config['targetFlowId']} is {state}, not active")
        [started] = await run_store.start_many(self.db, [run_store.StartRequest(
            automation=target, contact=contact, source=f"move:{run['_id']}:{run['seq']}",
            trigger={"type": "move_to_flow", "data": {"from_automation_id": automation["_id"],
                                                      "from_run_id": run["_id"]}})])
        if started.created and started.run["status"] == "active":
            await runtime.publisher().advance_runs([started.run["_id"]])
        outcome = "moved" if started.run is not None else "not_entered"
        detail = None if started.run is not None else "the target's re-entry rule refused the contact"
        record = entry(step, outcome, detail, target_automation_id=target["_id"],
                       target_run_id=started.run["_id"] if started.run else None)
        return Move(record, step_id=None if config["exitCurrentFlow"] else _next(automation, step))


def _next(automation: dict, step: dict) -> str | None:
    return step_rules.step_after(automation["steps"], step["id"])


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


EXECUTE = {
    "email": Engine.email, "delay": Engine.delay, "condition": Engine.condition, "tag": Engine.tag,
    "add_to_list": Engine.list_membership, "remove_from_list": Engine.list_membership,
    "update_attribute": Engine.update_attribute, "webhook": Engine.webhook,
    "wait_for_event": Engine.wait_for_event, "move_to_flow": Engine.move_to_flow,
}
