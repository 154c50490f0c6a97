"""The automation engine against the real store (pipelines/workflows/advance_automation_runs.py,
mongo/automation_runs.py): runs at the same step of one automation move together — one
render hand-off and one plan charge for the email step of a job's runs, one bulk write for
their moves — and each run is still moved once and emailed once when its job is repeated
or another worker moved it first. The broker is the recording publisher of these store
tests; the whole flow through RabbitMQ, a worker killed mid-flow included, is
tests/e2e/test_automation_crash.py."""

from __future__ import annotations

from mongo import automation_runs as run_store
from mongo import automations, contacts, messages, outbox, send_limits, suppressions, templates, webhooks, workspaces
from pipelines.automations import runs
from pipelines.automations.run_counts import RunCounts
from pipelines.core.clock import ms_in, utcnow
from pipelines.core.settings import Settings
from pipelines.messages import throttle
from pipelines.workflows.advance_automation_runs import advance_runs

SETTINGS = Settings()


class RecordingPublisher:
    """What the engine hands on, by call."""

    def __init__(self):
        self.render_calls: list[list[str]] = []
        self.advanced: list[str] = []

    async def render(self, message_ids, *, born=""):
        self.render_calls.append(list(message_ids))

    async def advance_runs(self, run_ids):
        self.advanced.extend(run_ids)


async def no_http(*_args, **_kwargs):
    raise AssertionError("no step here calls out")


async def one_email_flow(db, people: int, *, limit: int | None = None, steps: list[dict] | None = None):
    """A workspace, its contacts, an active automation of one email step, and a run of it
    for each contact (started as a trigger starts them). Returns (automation, contacts, runs)."""
    workspace = await workspaces.create(db, "Engine", from_email="hello@engine.example")
    if limit is not None:
        await db.workspaces.update_one({"_id": workspace["_id"]}, {"$set": {"monthly_email_limit": limit}})
    template = await templates.create(db, workspace["_id"], {"name": "W", "html": "<p>Hi {{first_name}}</p>"})
    found = [contacts.new_document(workspace["_id"], email=f"p{i}@engine.example", first_name=f"P{i}")
             for i in range(people)]
    await db.contacts.insert_many(found)
    flow = automations.new_document(
        workspace["_id"], name="One email", trigger_type="api", trigger_config={},
        steps=steps or [{"id": "mail", "step_type": "email", "position": 0,
                         "config": {"templateId": template["_id"], "subject": "Hi", "previewText": ""}}],
        key_id="key", sandbox=False)
    flow["status"] = "active"
    await automations.insert(db, flow)
    started = await run_store.start_many(db, [run_store.StartRequest(
        automation=flow, contact=c, source=f"api:{c['_id']}", trigger={"type": "api", "data": {}}) for c in found])
    return flow, found, [s.run for s in started]


async def flow_events(db, event: str) -> list[str]:
    return sorted(e["data"]["run_id"] for e in await db.outbox.find({"event": event}).to_list())


async def stored_runs(db, flow) -> list[dict]:
    return await db.automation_runs.find({"automation_id": flow["_id"]}, sort=[("_id", 1)]).to_list()


def test_the_runs_at_one_email_step_are_handed_to_render_together_and_charged_once(private_db):
    async def go(db):
        flow, people, started = await one_email_flow(db, 5)
        await db.contacts.update_one({"_id": people[3]["_id"]}, {"$set": {"subscribed": False}})
        await suppressions.add(db, flow["workspace_id"], people[4]["email"], "manual")
        triggered_before = await flow_events(db, "flow.triggered")
        publisher = RecordingPublisher()
        await advance_runs(db, SETTINGS, publisher, no_http, [r["_id"] for r in started])
        month = throttle.month_of(utcnow())
        return (flow, people, started, publisher, triggered_before, await stored_runs(db, flow),
                await send_limits.plan_used(db, flow["workspace_id"], month),
                await flow_events(db, "flow.triggered"), await flow_events(db, "flow.completed"))
    flow, people, started, publisher, triggered_before, after, used, triggered, completed = private_db.run(go)
    # one render hand-off for the three sendable runs, one charge of three
    assert len(publisher.render_calls) == 1 and len(publisher.render_calls[0]) == 3
    assert used == 3
    by_contact = {r["contact_id"]: r for r in after}
    outcomes = [[(e["step_id"], e["outcome"]) for e in by_contact[p["_id"]]["history"]] for p in people]
    assert outcomes == [[("mail", "sent")]] * 3 + [[("mail", "skipped")]] * 2
    assert {r["status"] for r in after} == {"completed"}
    sent = [by_contact[p["_id"]]["history"][0]["message_id"] for p in people[:3]]
    assert sorted(publisher.render_calls[0]) == sorted(sent)
    stored = private_db.run(messages.load, sent)
    assert sorted(m["to"][0] for m in stored) == [p["email"] for p in people[:3]]
    # flow.triggered travelled in the run until its first move wrote it; each event once, carriers empty
    assert triggered_before == []
    assert triggered == completed == sorted(r["_id"] for r in started)
    assert all(r[outbox.PENDING] == [] and r[outbox.PENDING_AT] == 0 for r in after)


def test_a_job_run_again_after_its_messages_were_stored_sends_and_charges_nothing_more(private_db):
    """The worker died after storing the step's messages and before moving the runs: the
    job's redelivery finds the messages, inserts none, charges none, hands them to render
    again (render's claim sends each once) and moves each run once."""
    async def go(db):
        flow, people, started = await one_email_flow(db, 3)
        publisher = RecordingPublisher()
        await advance_runs(db, SETTINGS, publisher, no_http, [r["_id"] for r in started])
        moved = await stored_runs(db, flow)
        # the same job again, on the runs as they were before it moved them
        await db.automation_runs.delete_many({"automation_id": flow["_id"]})
        await db.automation_runs.insert_many(started)
        again = RecordingPublisher()
        await advance_runs(db, SETTINGS, again, no_http, [r["_id"] for r in started])
        month = throttle.month_of(utcnow())
        return (publisher, again, moved, await stored_runs(db, flow),
                await send_limits.plan_used(db, flow["workspace_id"], month),
                await db.messages.count_documents({"workspace_id": flow["workspace_id"]}))
    publisher, again, moved, after, used, message_count = private_db.run(go)
    assert message_count == 3 and used == 3
    assert sorted(again.render_calls[0]) == sorted(publisher.render_calls[0])
    assert [[e["message_id"] for e in r["history"]] for r in after] == \
        [[e["message_id"] for e in r["history"]] for r in moved]
    assert all(r["status"] == "completed" and len(r["history"]) == 1 for r in after)


def test_past_the_plan_limit_the_first_runs_still_send_and_the_rest_fail(private_db):
    async def go(db):
        flow, people, started = await one_email_flow(db, 3, limit=2)
        publisher = RecordingPublisher()
        await advance_runs(db, SETTINGS, publisher, no_http, [r["_id"] for r in started])
        runs_after = await stored_runs(db, flow)
        failed = [r for r in runs_after if r["status"] == "failed"]
        message = (await messages.load(db, [runs.email_message_id(failed[0]["_id"], "mail", 0)]))[0]
        month = throttle.month_of(utcnow())
        return publisher, runs_after, message, await send_limits.plan_used(db, flow["workspace_id"], month)
    publisher, after, message, used = private_db.run(go)
    assert sorted(r["status"] for r in after) == ["completed", "completed", "failed"]
    assert used == 2
    assert [len(ids) for ids in publisher.render_calls] == [2]
    failed = next(r for r in after if r["status"] == "failed")
    assert "limit of 2 emails" in failed["error"] and message["status"] == "failed"


def test_the_engine_counts_runs_started_steps_taken_and_runs_ended_once_though_its_job_repeats(private_db):
    """What actors/automations.py records in the worker's metrics: from the moves that
    landed, so the same job again (a redelivery) counts nothing."""
    async def go(db):
        flow, people, started = await one_email_flow(db, 3, limit=2)
        counts, again = RunCounts(), RunCounts()
        await advance_runs(db, SETTINGS, RecordingPublisher(), no_http, [r["_id"] for r in started], counts)
        await advance_runs(db, SETTINGS, RecordingPublisher(), no_http, [r["_id"] for r in started], again)
        return counts, again
    counts, again = private_db.run(go)
    # past the plan limit of 2: two runs sent their email and completed, the third failed
    assert (counts.started, dict(counts.steps), dict(counts.ended)) == (3, {"email": 3}, {"completed": 2, "failed": 1})
    assert again == RunCounts()


def test_of_a_bulk_of_moves_only_the_runs_still_at_the_version_read_move(private_db):
    async def go(db):
        flow, people, started = await one_email_flow(db, 3, steps=[
            {"id": "wait", "step_type": "delay", "position": 0, "config": {"duration": 1, "unit": "days"}}])
        [first, second, third] = await stored_runs(db, flow)
        # another worker moved the second run first
        await db.automation_runs.update_one({"_id": second["_id"]}, {"$set": {"version": 1, "phase": "waiting"}})
        step = {"id": "wait", "step_type": "delay"}
        moves = [(r, runs.transition(r, runs.Move(runs.entry(step, "waited"), step_id=None)))
                 for r in (first, second, third)]
        landed = await run_store.transition_many(db, moves, flow)
        return second, landed, await stored_runs(db, flow), await flow_events(db, "flow.completed")
    second, landed, after, completed = private_db.run(go)
    assert sorted(r["_id"] for r in landed) == sorted(r["_id"] for r in after if r["_id"] != second["_id"])
    assert [r["status"] for r in after if r["_id"] == second["_id"]] == ["active"]
    assert [r["version"] for r in after if r["_id"] == second["_id"]] == [1]
    assert completed == sorted(r["_id"] for r in landed)
    assert all(r["status"] == "completed" and r["version"] == 1 for r in landed)


def test_a_run_started_waits_with_flow_triggered_carried_until_its_first_move(private_db):
    """A run the engine will move carries flow.triggered (its insert is the event's only
    write until then); a run that ends at once has it relayed at its start, and a carrier
    a dead writer left is relayed by the stranded sweep."""
    async def go(db):
        flow, people, started = await one_email_flow(db, 1)
        carried = (await stored_runs(db, flow))[0]
        empty = automations.new_document(flow["workspace_id"], name="Empty", trigger_type="api", trigger_config={},
                                         steps=[], key_id="key", sandbox=False)
        empty["status"] = "active"
        await automations.insert(db, empty)
        [done] = await run_store.start_many(db, [run_store.StartRequest(
            automation=empty, contact=people[0], source="api:x", trigger={"type": "api", "data": {}})])
        return carried, done.run, await db.outbox.find({}).to_list()
    carried, done, recorded = private_db.run(go)
    assert [e["event"] for e in carried[outbox.PENDING]] == ["flow.triggered"]
    assert sorted((e["data"]["run_id"], e["event"]) for e in recorded) == \
        [(done["_id"], "flow.completed"), (done["_id"], "flow.triggered")]


def test_flow_events_nobody_subscribes_to_are_recorded_already_dispatched(private_db):
    """Recorded either way; the dispatch reads only those a subscription listens to (the
    others it would mark dispatched with no delivery, one write each)."""
    async def go(db):
        flow, people, started = await one_email_flow(db, 2)
        await webhooks.create(db, flow["workspace_id"], events=["flow.completed"], target_url="https://hooks.example/x",
                              secret_sealed="sealed", form="json")
        await advance_runs(db, SETTINGS, RecordingPublisher(), no_http, [started[0]["_id"]])
        pending = {(e["event"], e["data"]["run_id"]) for e in await outbox.pending(db)}
        recorded = {(e["event"], e["data"]["run_id"]) for e in await db.outbox.find({}).to_list()}
        return started, pending, recorded
    started, pending, recorded = private_db.run(go)
    first = started[0]["_id"]
    # (the second run, not moved yet, still carries its flow.triggered)
    assert recorded == {("flow.triggered", first), ("flow.completed", first)}
    # flow.triggered happened before the subscription existed: nothing to deliver
    assert pending == {("flow.completed", first)}


def test_a_pledge_a_dead_engine_left_records_flow_completed_only_for_the_runs_that_completed(private_db):
    """The engine pledges a bulk's flow events before replacing its runs (carrying none) and
    records them after: a worker that died in between leaves the pledge, and the sweep
    records each run's flow.triggered, and flow.completed only where the run is completed
    (a replacement that never landed completed nothing)."""
    async def go(db):
        flow, people, started = await one_email_flow(db, 2, steps=[
            {"id": "wait", "step_type": "delay", "position": 0, "config": {"duration": 1, "unit": "days"}}])
        [landed, lost] = await stored_runs(db, flow)
        step = {"id": "wait", "step_type": "delay"}
        owed = {}
        for run in (landed, lost):
            done = runs.applied(run, runs.transition(run, runs.Move(runs.entry(step, "waited"), step_id=None)))
            owed[run["_id"]] = [*run[outbox.PENDING],
                                run_store._flow_event(done, flow, "flow.completed", set())]
            if run is landed:  # the one replacement that landed before the worker died
                await db.automation_runs.replace_one({"_id": run["_id"]}, {**done, **outbox.no_events()})
        pledge_id = await outbox.pledge(db, "automation_runs", owed, owed_when=run_store._OWED_WHEN)
        await db[outbox.PLEDGES].update_one({"_id": pledge_id},
                                            {"$set": {outbox.PENDING_AT: ms_in(-outbox.STRANDED_AFTER_SECONDS - 5)}})
        await outbox.relay_stranded(db)
        return (landed, lost, await flow_events(db, "flow.triggered"), await flow_events(db, "flow.completed"),
                await db[outbox.PLEDGES].count_documents({}))
    landed, lost, triggered, completed, pledges = private_db.run(go)
    assert triggered == sorted([landed["_id"], lost["_id"]])
    assert completed == [landed["_id"]]
    assert pledges == 0
