"""An automation run as plain code: its document, its states, and the changes that move it.

A run is one contact going through one automation. It is a document (mongo/automation_runs.py)
and every write to it is a compare-and-set on its integer `version`, which every write
increments: of two workers holding the same run (a redelivered job, a duplicate) only the
first transition lands, and the other stops.

    status   active ──▶ completed | failed | cancelled;  active ⇄ paused (with the automation)
    phase    where an active run is inside its current step (`step_id`):
      ready    the step is to be executed                   (wake_ms: hand-off deadline)
      waiting  a delay, an event wait or a webhook retry     (wake_ms: when it is due)
      calling  a webhook attempt in flight                   (wake_ms: the attempt's lease)
      due      the wait is over, the step is to be finished   (wake_ms: hand-off deadline)

`wake_ms` (epoch milliseconds; NEVER_MS when nothing is due) is the only time the scheduler
looks at: a run whose wake_ms has passed is handed to the `automations` queue, and a
`waiting` or `calling` one becomes `due` on the way. So a lost broker message, a worker
killed mid-step and a wait that ran out are all the same case: the scheduler finds the
run due. It is an integer, not an ISO string, because the embedded store answers a range
query on date-like strings by scanning (see docs/store-notes.md).

`seq` counts the steps a run has entered. A step's side effect is keyed on (run, step,
seq) — the email step's message id is derived from them — so executing a step again after
a crash finds its effect already done."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib

from pipelines.campaigns.fanout import campaign_message
from pipelines.core.clock import iso, utcnow
from pipelines.templates.personalise import stored_template_data

STATUSES = ("active", "completed", "failed", "paused", "cancelled")
OPEN_STATUSES = ("active", "paused")
ENDED_STATUSES = ("completed", "failed", "cancelled")
NEVER_MS = 2**62
# A run handed to the broker is left to that message this long; after it the scheduler
# assumes the message was lost and hands the run over again (duplicates are harmless).
HANDOFF_GRACE_SECONDS = 60
# Steps a run may take in a row without waiting before it is stopped as a loop.
MAX_HOPS_WITHOUT_WAIT = 100
# Automation emails track opens and clicks (what email_opened / email_clicked waits need).
TRACK_EMAILS = True


def to_ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def now_ms() -> int:
    return to_ms(utcnow())


def ms_iso(ms: int) -> str | None:
    if ms >= NEVER_MS:
        return None
    return iso(dt.datetime.fromtimestamp(ms / 1000, dt.UTC))


def new_run(*, run_id: str, automation: dict, contact: dict, trigger: dict, first_step: str | None,
            now: dt.datetime) -> dict:
    """A run starting at the automation's first step (ready, handed off now), or, for an
    automation without steps, completed at once."""
    at, ms = iso(now), to_ms(now)
    doc = {
        "_id": run_id, "workspace_id": automation["workspace_id"], "automation_id": automation["_id"],
        "contact_id": contact["_id"], "contact_email": contact["email"],
        "status": "active", "step_id": first_step or "", "phase": "ready", "version": 0, "seq": 0 if first_step else -1,
        "wake_ms": ms + HANDOFF_GRACE_SECONDS * 1000, "resume_ms": 0, "wait_event": "", "wait_since": "",
        "attempts": 0, "hops": 0,
        "history": [], "passed_steps": [], "trigger": trigger, "error": None,
        "created_at": at, "updated_at": at, "ended_at": None,
    }
    if first_step is None:
        doc.update(status="completed", phase="", wake_ms=NEVER_MS, ended_at=at)
    return doc


@dataclasses.dataclass
class Move:
    """Where a step leaves the run: the fields of the transition and its history entry."""
    entry: dict                      # the history entry for the step left (or attempted)
    step_id: str | None = None       # the next step; None ends the run (see `status`)
    status: str = "active"
    phase: str = "ready"
    wake_ms: int | None = None       # None: hand-off deadline from now (ready), or NEVER (ended)
    wait_event: str = ""
    attempts: int = 0
    passed: bool = True              # the step was passed (not failed, not still waiting)
    new_step: bool = True            # entering another step (seq + 1), not staying in this one
    error: str | None = None


def entry(step: dict, outcome: str, detail: str | None = None, **data) -> dict:
    out = {"step_id": step["id"], "step_type": step["step_type"], "outcome": outcome, "at": iso(utcnow())}
    if detail:
        out["detail"] = detail
    out.update({k: v for k, v in data.items() if v is not None})
    return out


def transition(run: dict, move: Move) -> dict:
    """The `$set`/`$addToSet` update that applies `move` to `run` (guarded on its version by
    the store). `seq` stamps the history entry, so two visits of a step are two entries."""
    now = utcnow()
    at, ms = iso(now), to_ms(now)
    ended = move.step_id is None or move.status in ENDED_STATUSES
    status = (move.status if move.status in ENDED_STATUSES else "completed") if ended else move.status
    fields = {"version": run["version"] + 1, "updated_at": at, "attempts": move.attempts,
              "wait_event": move.wait_event, "wait_since": at if move.wait_event else "", "error": move.error}
    if ended:
        fields.update(status=status, phase="", wake_ms=NEVER_MS, ended_at=at,
                      step_id=run["step_id"] if status == "failed" else "")
    else:
        waited = move.phase in ("waiting", "calling")
        fields.update(status=move.status, step_id=move.step_id, phase=move.phase,
                      wake_ms=move.wake_ms if move.wake_ms is not None else ms + HANDOFF_GRACE_SECONDS * 1000,
                      hops=0 if waited else run.get("hops", 0) + 1)
        if move.new_step:
            fields["seq"] = run["seq"] + 1
    update: dict = {"$set": fields, "$addToSet": {"history": {**move.entry, "seq": run["seq"]}}}
    if move.passed:
        update["$addToSet"]["passed_steps"] = move.entry["step_id"]
    return update


def applied(run: dict, update: dict) -> dict:
    """The run as it is after `update` landed (no need to read it back)."""
    out = {**run, **update["$set"]}
    out["history"] = [*run.get("history", []), update["$addToSet"]["history"]]
    if "passed_steps" in update["$addToSet"]:
        out["passed_steps"] = sorted({*run.get("passed_steps", []), update["$addToSet"]["passed_steps"]})
    return out


def flow_event_data(run: dict, automation: dict) -> dict:
    """`data` of flow.triggered and flow.completed."""
    data = {"automation": {"id": automation["_id"], "name": automation["name"]}, "run_id": run["_id"],
            "contact": {"id": run["contact_id"], "email": run["contact_email"]},
            "trigger": {"type": run["trigger"]["type"], "data": run["trigger"].get("data") or {}},
            "started_at": run["created_at"]}
    if run.get("ended_at"):
        data["completed_at"] = run["ended_at"]
    return data


def email_message_id(run_id: str, step_id: str, seq: int) -> str:
    """The email step's message id: one message per run, step and visit, so executing the
    step again (a redelivered job, a worker killed mid-step) finds it already there."""
    digest = hashlib.sha256(f"{run_id}\x00{step_id}\x00{seq}".encode()).hexdigest()[:32]
    return f"msg_{digest}"


def email_message(*, run: dict, step: dict, automation: dict, contact: dict, template: dict,
                  sender: dict, now: str) -> dict:
    """The email step's message: a campaign-style message (pipelines.campaigns.fanout) of
    kind `automation`, tracked, with the run's trigger data as template data."""
    config = step["config"]
    source = {"_id": automation["_id"], "workspace_id": automation["workspace_id"], "key_id": automation["key_id"],
              "sandbox": automation.get("sandbox"), "subject": config["subject"], "template_id": template["_id"],
              "template_version": template["version"], "sender": sender,
              "track_opens": TRACK_EMAILS, "track_clicks": TRACK_EMAILS}
    return {**campaign_message(source, contact, now),
            "_id": email_message_id(run["_id"], step["id"], run["seq"]), "kind": "automation",
            "campaign_id": None, "automation_id": automation["_id"], "run_id": run["_id"],
            **stored_template_data((run.get("trigger") or {}).get("data")),
            "preview_text": config["previewText"] or None}
