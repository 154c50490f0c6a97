"""One step of automation runs, by its kind: a function per step kind, chosen from one of
two tables, each returning the `Move` that leaves a run where the step put it.
`STEP_KINDS` take one run; `GROUP_KINDS` (the email step) take every run of a job at the
same step together, so their reads and writes are one per group, as a campaign part's
are. Called by workflows/advance_automation_runs.py, whose docstring says how each step's
side effect is keyed so that doing it again after a crash finds it done.

A step that cannot go on raises `Stop` (the run ends failed or cancelled with its reason;
a group kind returns it in the run's place). What the runs of one job share (workspaces,
senders, templates, tags, each run's contact between steps that do not change it) is read
once per job through its `JobView`."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from pymongo.asynchronous.database import AsyncDatabase

from mongo import automation_runs as run_store
from mongo import (
    campaign_audience,
    contacts,
    lists,
    memberships,
    messages,
    send_limits,
    suppressions,
    tags,
    templates,
    workspaces,
)
from mongo.automations import load_many as load_automations
from pipelines import views
from pipelines.adapters.http_client import HttpResult
from pipelines.automations import runs
from pipelines.automations import steps as step_rules
from pipelines.automations.run_counts import RunCounts
from pipelines.automations.runs import Move, entry
from pipelines.core.clock import now_iso, utcnow
from pipelines.core.documents import Workspace
from pipelines.core.errors import PostroomError
from pipelines.core.settings import Settings
from pipelines.messages import delivery_status, throttle
from pipelines.templates.personalise import contact_fields
from pipelines.workflows import start_campaign
from pipelines.workflows.publisher import Publisher

WEBHOOK_ATTEMPTS = 4             # the first and three retries, then the run fails
WEBHOOK_RETRY_SECONDS = (30, 120, 600)  # × POSTROOM_WEBHOOK_RETRY_SCALE
WEBHOOK_TIMEOUT_SECONDS = 10.0
# The claim of a webhook attempt outlasts the call; past it the scheduler takes the worker for dead.
WEBHOOK_LEASE_SECONDS = WEBHOOK_TIMEOUT_SECONDS + 20
MAX_ATTRIBUTES = 100
TAG_COLOR = "#6366f1"  # a tag a step creates gets the API's default colour

# Steps that change the contact: the next step reads it again.
CHANGES_CONTACT = {"tag", "add_to_list", "remove_from_list", "update_attribute"}


class HttpRequest(Protocol):
    """The outbound HTTP adapter's `request` (pipelines/adapters/http_client.py): never raises."""

    async def __call__(self, method: str, url: str, body: bytes | None, headers: dict[str, str], *,
                      allow_private: bool, timeout_seconds: float) -> HttpResult: ...


class Stop(Exception):
    """The run cannot go on: it ends with `status` (failed or cancelled) and `reason`."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclasses.dataclass
class JobView:
    """One job's ports, the automations of its runs, and what its runs share, read once
    per job rather than once per run and step."""
    db: AsyncDatabase
    settings: Settings
    publisher: Publisher
    http: HttpRequest
    automations: dict[str, dict]
    counts: RunCounts = dataclasses.field(default_factory=RunCounts)  # what the job did, for the metrics
    workspace_cache: dict[str, Workspace | None] = dataclasses.field(default_factory=dict)
    sender_cache: dict = dataclasses.field(default_factory=dict)
    template_cache: dict = dataclasses.field(default_factory=dict)
    tag_cache: dict = dataclasses.field(default_factory=dict)
    contact_cache: dict = dataclasses.field(default_factory=dict)

    async def read_contacts(self, runs_in_hand: list[dict]) -> None:
        """The contacts of these runs not in hand yet, in one read per workspace (one
        gone is remembered as None)."""
        wanted: dict[str, list[dict]] = {}
        for run in runs_in_hand:
            if run["_id"] not in self.contact_cache:
                wanted.setdefault(run["workspace_id"], []).append(run)
        for workspace_id, of_workspace in wanted.items():
            found = {c["_id"]: c for c in await campaign_audience.live_contacts_by_ids(
                self.db, workspace_id, list({r["contact_id"] for r in of_workspace}))}
            for run in of_workspace:
                self.contact_cache[run["_id"]] = found.get(run["contact_id"])

    async def contact(self, run: dict) -> dict:
        if run["_id"] not in self.contact_cache:
            await self.read_contacts([run])
        found = self.contact_cache[run["_id"]]
        if found is None:
            raise Stop("cancelled", "the contact no longer exists")
        return found

    async def workspace(self, workspace_id: str) -> Workspace:
        if workspace_id not in self.workspace_cache:
            self.workspace_cache[workspace_id] = await workspaces.get(self.db, workspace_id)
        workspace = self.workspace_cache[workspace_id]
        if workspace is None:
            raise Stop("failed", "the workspace no longer exists")
        return workspace

    async def sender(self, workspace: Workspace) -> dict:
        """The workspace's default sender, resolved as a campaign's is (its verified domains)."""
        if workspace["_id"] not in self.sender_cache:
            try:
                self.sender_cache[workspace["_id"]] = await start_campaign.resolve_sender(
                    self.db, workspace, None, None, None, shared_domain=self.settings.shared_domain)
            except PostroomError as error:
                self.sender_cache[workspace["_id"]] = Stop("failed", error.message)
        found = self.sender_cache[workspace["_id"]]
        if isinstance(found, Stop):
            raise found
        return found

    async def template(self, workspace_id: str, template_id: str) -> dict:
        key = (workspace_id, template_id)
        if key not in self.template_cache:
            self.template_cache[key] = await templates.get(self.db, workspace_id, template_id)
        if self.template_cache[key] is None:
            raise Stop("failed", f"the template {template_id} no longer exists")
        return self.template_cache[key]

    async def tag(self, workspace_id: str, name: str, create: bool) -> dict | None:
        """The workspace's tag of this name; created (or found created meanwhile) when asked."""
        key = (workspace_id, name.lower())
        if self.tag_cache.get(key) is None:
            found = await tags.find_by_name(self.db, workspace_id, name)
            if found is None and create:
                found = (await tags.create(self.db, workspace_id, name=name, color=TAG_COLOR, description=None)
                         or await tags.find_by_name(self.db, workspace_id, name))
            self.tag_cache[key] = found
        return self.tag_cache[key]


def _next(automation: dict, step: dict) -> str | None:
    return step_rules.step_after(automation["steps"], step["id"])


# -- waits ------------------------------------------------------------------------------------

async def delay(job: JobView, run: dict, step: dict, automation: dict, contact: dict) -> Move:
    seconds = step_rules.wait_seconds("delay", step["config"])
    wake = runs.now_ms() + int(seconds * 1000)
    return Move(entry(step, "waiting", until=runs.ms_iso(wake)), step_id=step["id"], phase="waiting",
                wake_ms=wake, passed=False, new_step=False)


async def wait_for_event(job: JobView, run: dict, step: dict, automation: dict, contact: dict) -> Move:
    config = step["config"]
    wake = runs.now_ms() + int(step_rules.wait_seconds("wait_for_event", config) * 1000)
    return Move(entry(step, "waiting", f"for {config['eventType']}", until=runs.ms_iso(wake)),
                step_id=step["id"], phase="waiting", wake_ms=wake, wait_event=config["eventType"],
                passed=False, new_step=False)


# -- steps that read or change the contact ------------------------------------------------------

async def condition(job: JobView, run: dict, step: dict, automation: dict, contact: dict) -> Move:
    holds = step_rules.condition_holds(contact, step["config"])
    branch = step["config"]["trueBranchStepId" if holds else "falseBranchStepId"]
    return Move(entry(step, "true" if holds else "false"),
                step_id=step_rules.branch_or_next(automation["steps"], step["id"], branch))


async def tag(job: JobView, run: dict, step: dict, automation: dict, contact: dict) -> Move:
    config, workspace_id = step["config"], run["workspace_id"]
    found = await job.tag(workspace_id, config["tagName"], create=config["action"] == "add")
    if config["action"] == "add":  # the step creates the tag it names when it does not exist
        assert found is not None, "asked to create it, the tag is there"
        outcome = await tags.assign(job.db, found, [contact["_id"]])
        done = "tagged" if outcome.changed else "already_tagged"
    elif found is None:
        done = "not_tagged"
    else:
        outcome = await memberships.remove(job.db, workspace_id, "tags", found["_id"], [contact["_id"]])
        done = "untagged" if outcome.changed else "not_tagged"
    return Move(entry(step, done, config["tagName"]), step_id=_next(automation, step))


async def list_membership(job: JobView, run: dict, step: dict, automation: dict, contact: dict) -> Move:
    found = await lists.get(job.db, run["workspace_id"], step["config"]["listId"])
    if found is None:
        raise Stop("failed", f"the list {step['config']['listId']} no longer exists")
    if step["step_type"] == "add_to_list":
        changed = (await lists.add_members(job.db, found, [contact["_id"]], reason="automation")).changed
        done = "added" if changed else "already_member"
    else:
        changed = (await lists.remove_members(job.db, found, [contact["_id"]], reason="automation")).changed
        done = "removed" if changed else "not_member"
    return Move(entry(step, done, found["name"]), step_id=_next(automation, step))


async def update_attribute(job: JobView, run: dict, step: dict, automation: dict, contact: dict) -> Move:
    config = step["config"]
    try:
        outcome = await contacts.update(job.db, run["workspace_id"], contact["_id"], fields={},
                                        set_attributes={config["attributeName"]: config["attributeValue"]},
                                        unset_attributes=[], max_attributes=MAX_ATTRIBUTES)
    except LookupError:
        raise Stop("cancelled", "the contact no longer exists") from None
    if outcome is contacts.Refusal.TOO_MANY_ATTRIBUTES:
        raise Stop("failed", f"attributes: a contact has at most {MAX_ATTRIBUTES} attributes") from None
    return Move(entry(step, "updated", f"{config['attributeName']} = {config['attributeValue']!r}"),
                step_id=_next(automation, step))


# -- steps with an outside effect -----------------------------------------------------------------

async def email(job: JobView, at_step: list[dict], step: dict, automation: dict) -> list[Move | Stop]:
    """The email step of every run in `at_step` (runs of `automation` at `step`), in the
    runs' order: one suppression read, one read and one bulk insert of their messages,
    one plan charge, and render jobs of up to 100 messages (actors/publish.RENDER_CHUNK)
    — a campaign part's costs, not a send's per run. Each message is inserted once (its
    `_id` keyed on run, step and visit): a repeat finds it and only publishes its render
    again, and render's claim sends a message once."""
    nxt = _next(automation, step)
    outcome: dict[str, Move | Stop] = {}
    people: dict[str, dict] = {}
    for run in at_step:
        try:
            people[run["_id"]] = await job.contact(run)
        except Stop as stop:
            outcome[run["_id"]] = stop
    for run_id, why in (await _why_not_send(job, automation["workspace_id"], people)).items():
        outcome[run_id] = Move(entry(step, "skipped", why), step_id=nxt)
    sending = [r for r in at_step if r["_id"] in people and r["_id"] not in outcome]
    try:
        made = await _stored_emails(job, sending, step, automation, people)
    except Stop as stop:  # the template, workspace or sender is gone: every run here stops
        made = {r["_id"]: stop for r in sending}
    await job.publisher.render([m["_id"] for m in made.values() if isinstance(m, dict)])
    for run_id, message in made.items():
        outcome[run_id] = message if isinstance(message, Stop) else \
            Move(entry(step, "sent", message_id=message["_id"]), step_id=nxt)
    return [outcome[r["_id"]] for r in at_step]


async def _why_not_send(job: JobView, workspace_id: str, people: dict[str, dict]) -> dict[str, str]:
    """Run id → why its contact gets no email (unsubscribed, bounced, suppressed)."""
    why = {run_id: "the contact is unsubscribed" if not c["subscribed"] else "the contact has bounced"
           for run_id, c in people.items() if not c["subscribed"] or c["bounced"]}
    emails = [c["email"] for run_id, c in people.items() if run_id not in why]
    suppressed = await suppressions.suppressed_among(job.db, workspace_id, emails) if emails else set()
    why.update({run_id: "the address is on the suppression list"
                for run_id, c in people.items() if run_id not in why and c["email"] in suppressed})
    return why


async def _stored_emails(job: JobView, sending: list[dict], step: dict, automation: dict,
                         people: dict[str, dict]) -> dict[str, dict | Stop]:
    """Run id → the step's message for it, inserted once and charged to the plan when
    this call inserted it; past the plan's limit, Stop (the message failed, the run too)."""
    if not sending:
        return {}
    workspace_id = automation["workspace_id"]
    template = await job.template(workspace_id, step["config"]["templateId"])
    workspace = await job.workspace(workspace_id)
    sender = await job.sender(workspace)
    now = now_iso()
    made = {r["_id"]: runs.email_message(run=r, step=step, automation=automation, contact=people[r["_id"]],
                                         template=template, sender=sender, now=now) for r in sending}
    # found: the step ran before for these runs and stopped before moving them on
    found = {m["_id"] for m in await messages.load(job.db, [m["_id"] for m in made.values()])}
    new = [m for m in made.values() if m["_id"] not in found]
    inserted = await messages.insert_new(job.db, new)
    limit = throttle.monthly_limit(workspace, job.settings.plan_monthly_email_limit)
    over = await _past_the_plan(job, workspace["_id"], limit, [m for m in new if not m["sandbox"]], inserted)
    past = Stop("failed", f"the plan's limit of {limit} emails this month has been reached")
    return {run_id: past if m["_id"] in over else m for run_id, m in made.items()}


async def _past_the_plan(job: JobView, workspace_id: str, limit: int, new: list[dict], inserted: int) -> set[str]:
    """Charge the plan for the messages this call inserted (`inserted` of `new`: fewer
    when a duplicate job inserted some meanwhile); the ids of those past its monthly
    limit, failed. One charge for the lot; when it is refused, one a message (the first
    ones still fit)."""
    month = throttle.month_of(utcnow())
    if not new or await send_limits.charge_plan(job.db, workspace_id, month, min(inserted, len(new)), limit):
        return set()
    over = {m["_id"] for m in new if not await send_limits.charge_plan(job.db, workspace_id, month, 1, limit)}
    await messages.apply(job.db, [delivery_status.fail(mid, "the plan's monthly email limit was reached")
                                  for mid in sorted(over)])
    return over


async def webhook(job: JobView, run: dict, step: dict, automation: dict, contact: dict) -> Move | None:
    """One attempt, claimed before the call (None: another worker claimed it first)."""
    attempt = run["attempts"] + 1
    lease = runs.now_ms() + int(WEBHOOK_LEASE_SECONDS * 1000)
    claimed = await run_store.update_guarded(job.db, run, {"phase": "calling", "attempts": attempt, "wake_ms": lease})
    if claimed is None:
        return None
    run.update(claimed)  # the transition that follows is guarded on the claim's version
    result = await _call_webhook(job, run, step, automation, contact)
    return _after_webhook(job, step, automation, attempt, result)


async def _call_webhook(job: JobView, run: dict, step: dict, automation: dict, contact: dict) -> HttpResult:
    config = step["config"]
    data = {**contact_fields(contact, contact["email"]), **((run.get("trigger") or {}).get("data") or {}),
            "automation_id": automation["_id"], "run_id": run["_id"]}
    default_body = {"event": "automation.webhook", "automation": {"id": automation["_id"], "name": automation["name"]},
                    "run_id": run["_id"], "step_id": step["id"],
                    "contact": views.contact(contact), "trigger": run["trigger"]}
    body, headers = step_rules.webhook_request(config, data=data, default_body=default_body,
                                               delivery_id=f"{run['_id']}:{step['id']}:{run['seq']}")
    return await job.http(config["method"], config["url"], body, headers,
                          allow_private=job.settings.allow_private_targets, timeout_seconds=WEBHOOK_TIMEOUT_SECONDS)


def _after_webhook(job: JobView, step: dict, automation: dict, attempt: int, result: HttpResult) -> Move:
    """On to the next step, a retry later, or the run failed after the last attempt."""
    record = entry(step, "delivered" if result.ok else "attempt_failed", result.error, attempt=attempt,
                   status_code=result.status_code, duration_ms=result.duration_ms)
    if result.ok:
        return Move(record, step_id=_next(automation, step))
    if attempt < WEBHOOK_ATTEMPTS:
        wake = runs.now_ms() + int(WEBHOOK_RETRY_SECONDS[attempt - 1] * job.settings.webhook_retry_scale * 1000)
        return Move(record, step_id=step["id"], phase="waiting", wake_ms=wake, attempts=attempt,
                    passed=False, new_step=False)
    return Move(record, status="failed", passed=False,
                error=f"webhook failed after {attempt} attempts: {result.error}")


async def move_to_flow(job: JobView, run: dict, step: dict, automation: dict, contact: dict) -> Move:
    config = step["config"]
    target = await _active_target(job, run, config["targetFlowId"])
    [started] = await run_store.start_many(job.db, [run_store.StartRequest(
        automation=target, contact=contact, source=f"move:{run['_id']}:{run['seq']}",
        trigger={"type": "move_to_flow", "data": {"from_automation_id": automation["_id"],
                                                  "from_run_id": run["_id"]}})])
    if started.created and started.run is not None and started.run["status"] == "active":
        await job.publisher.advance_runs([started.run["_id"]])
    outcome = "moved" if started.run is not None else "not_entered"
    detail = None if started.run is not None else "the target's re-entry rule refused the contact"
    record = entry(step, outcome, detail, target_automation_id=target["_id"],
                   target_run_id=started.run["_id"] if started.run else None)
    return Move(record, step_id=None if config["exitCurrentFlow"] else _next(automation, step))


async def _active_target(job: JobView, run: dict, target_id: str) -> dict:
    target = (await load_automations(job.db, [target_id])).get(target_id)
    if target is None or target["deleted"] or target["workspace_id"] != run["workspace_id"] \
            or target["status"] != "active":
        state = "deleted" if target is None or target["deleted"] else target["status"]
        raise Stop("failed", f"the target automation {target_id} is {state}, not active")
    return target


STEP_KINDS = {
    "delay": delay, "condition": condition, "tag": tag,
    "add_to_list": list_membership, "remove_from_list": list_membership,
    "update_attribute": update_attribute, "webhook": webhook,
    "wait_for_event": wait_for_event, "move_to_flow": move_to_flow,
}
GROUP_KINDS = {"email": email}
