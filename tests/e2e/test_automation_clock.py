"""Days-long automation waits on a clock the test controls: a private stack (front,
scheduler, worker) runs under libfaketime and the test moves its clock — delays of days and
weeks, wait_for_event timeouts with each timeout action, and date_attribute anniversaries at
their time of day. Nothing waits for real time, and nothing is forced in the store."""

import datetime as dt
import uuid

import pytest

from tests.support.audience import make_contact
from tests.support.automations import make_automation, outcomes, run_of, runs, trigger, wait_run
from tests.support.campaigns import make_template
from tests.support.polling import wait_until
from tests.support.private_stack import ControlledClock, private_stack

DAY = 86400


@pytest.fixture(scope="module")
def clocked_stack(service, store_url, run_dir):
    """One stack for the module (a stack costs seconds of CPU to start); its clock only goes
    forward, each test on its own time line from where the last one left it."""
    clock = ControlledClock(run_dir / f"clock-{uuid.uuid4().hex[:6]}")
    # every process on the moved clock (the worker computes wake times, the scheduler compares
    # them); libfaketime moves the monotonic clock too, which a broker heartbeat would read as
    # a silent peer: heartbeats off for this stack
    # The front waits for a busy store as long as workers do (this test is not about outages).
    # A jump times out whatever store call is in flight (its deadline is on the moved clock):
    # the test's reads after a jump ask again on 503 (harness.ReadAgainOnUnavailable).
    env = {**clock.env(), "POSTROOM_FRONT_STORE_WAIT_SECONDS": "5"}
    with private_stack(service, store_url, run_dir, "autoclock", env=env, amqp_query="heartbeat=0") as stack:
        stack.retry_unavailable_reads = True
        stack.start_worker("worker")
        yield stack, clock


@pytest.fixture
def clocked(clocked_stack):
    stack, clock = clocked_stack
    clock.begin()
    return stack, clock


def address(name):
    return f"{name}-{uuid.uuid4().hex[:8]}@clock.example"


def test_delays_of_days_and_weeks_wait_until_the_clock_reaches_them(clocked):
    stack, clock = clocked
    tenant = stack.tenant()
    template = make_template(tenant)
    flow = make_automation(tenant, [
        {"id": "first", "step_type": "tag", "config": {"tagName": "started"}},
        {"id": "two-days", "step_type": "delay", "config": {"duration": 2, "unit": "days"}},
        {"id": "middle", "step_type": "tag", "config": {"tagName": "middle"}},
        {"id": "a-week", "step_type": "delay", "config": {"duration": 1, "unit": "weeks"}},
        {"id": "mail", "step_type": "email", "config": {"templateId": template["id"], "subject": "A week on"}}])
    one_day = make_automation(tenant, [{"step_type": "delay", "config": {"duration": 24, "unit": "hours"}}],
                              name="one day")
    contact = make_contact(tenant, address("patient"))
    run = trigger(tenant, flow["id"], contact)
    short = trigger(tenant, one_day["id"], contact)
    waiting = wait_run(tenant, flow["id"], run["id"], status="active", where=lambda r: r["next_wake_at"])
    assert waiting["current_step"]["id"] == "two-days"
    wake = dt.datetime.fromisoformat(waiting["next_wake_at"].replace("Z", "+00:00"))
    assert 2 * DAY - 120 < (wake - clock.now()).total_seconds() <= 2 * DAY + 5

    clock.set(DAY + 60)  # the one-day delay ends; the two-day one, looked at in the same passes, waits on
    wait_run(tenant, one_day["id"], short["id"])
    assert run_of(tenant, flow["id"], run["id"])["current_step"]["id"] == "two-days"
    clock.set(2 * DAY + 60)
    at_week = wait_run(tenant, flow["id"], run["id"], status="active",
                       where=lambda r: r["current_step"]["id"] == "a-week" and r["next_wake_at"])
    assert ("two-days", "waited") in outcomes(at_week) and ("middle", "tagged") in outcomes(at_week)
    assert stack.smtp.messages_to(contact["email"]) == []

    clock.set(9 * DAY + 120)
    done = wait_run(tenant, flow["id"], run["id"])
    assert outcomes(done)[-2:] == [("a-week", "waited"), ("mail", "sent")]
    [mail] = stack.smtp.wait_for(contact["email"])
    assert mail.message["Subject"] == "A week on"


@pytest.mark.parametrize("action, expected", [
    ("continue", [("a", "tagged"), ("b", "tagged"), ("c", "tagged")]),
    ("skip", [("b", "tagged"), ("c", "tagged")]),
    ("branch", [("c", "tagged")]),
])
def test_a_wait_for_event_that_times_out_continues_skips_or_branches(clocked, action, expected):
    stack, clock = clocked
    tenant = stack.tenant()
    config = {"eventType": "email_clicked", "timeoutDays": 2, "timeoutAction": action}
    if action == "branch":
        config["timeoutBranchStepId"] = "c"
    flow = make_automation(tenant, [{"id": "wait", "step_type": "wait_for_event", "config": config}] + [
        {"id": name, "step_type": "tag", "config": {"tagName": f"step-{name}"}} for name in ("a", "b", "c")])
    contact = make_contact(tenant, address(action))
    run = trigger(tenant, flow["id"], contact)
    waiting = wait_run(tenant, flow["id"], run["id"], status="active", where=lambda r: r["waiting_for"])
    assert waiting["waiting_for"] == "email_clicked"

    clock.set(2 * DAY + 60)
    done = wait_run(tenant, flow["id"], run["id"])
    assert outcomes(done) == [("wait", "waiting"), ("wait", "timed_out"), *expected]


def test_date_attribute_starts_runs_on_the_anniversary_at_its_time_of_day_once_a_year(clocked):
    stack, clock = clocked
    tenant = stack.tenant()
    morning = (clock.now() + dt.timedelta(days=10)).replace(hour=8, minute=59, second=30, microsecond=0)
    anniversary = morning.date() + dt.timedelta(days=1)  # offset -1: the day before
    birthday = f"1990-{anniversary:%m-%d}"
    other_day = f"1985-{(anniversary + dt.timedelta(days=3)):%m-%d}"
    celebrant = make_contact(tenant, address("celebrant"), attributes={"birthday": birthday})
    timed = make_contact(tenant, address("timed"), attributes={"birthday": f"{birthday}T10:00:00Z"})
    not_today = make_contact(tenant, address("not-today"), attributes={"birthday": other_day})
    no_date = make_contact(tenant, address("no-date"))
    flow = make_automation(tenant, [{"id": "greet", "step_type": "tag", "config": {"tagName": "birthday-eve"}}],
                           trigger_type="date_attribute",
                           trigger_config={"attribute": "birthday", "offset_days": -1, "time_of_day": "09:00"})
    early = make_automation(tenant, [{"step_type": "tag", "config": {"tagName": "early"}}], name="early",
                            trigger_type="date_attribute",
                            trigger_config={"attribute": "birthday", "offset_days": -1, "time_of_day": "08:00"})

    def set_clock(moment):
        clock.set(int((moment - clock.now()).total_seconds()) + clock.offset - clock.epoch)

    set_clock(morning)
    # the 08:00 automation fires in a pass that also looked at the 09:00 one: a barrier
    wait_until(lambda: len(runs(tenant, early["id"], "completed")) == 2, what="the 08:00 runs")
    assert runs(tenant, flow["id"]) == []

    set_clock(morning + dt.timedelta(minutes=2))
    started = wait_until(lambda: (found := runs(tenant, flow["id"], "completed")) and len(found) == 2 and found,
                         what="the 09:00 runs")
    assert {r["contact"]["id"] for r in started} == {celebrant["id"], timed["id"]}
    run = next(r for r in started if r["contact"]["id"] == celebrant["id"])
    assert run["trigger"] == {"type": "date_attribute", "data": {"attribute": "birthday", "value": birthday,
                                                                 "date": morning.date().isoformat()}}
    assert not_today["id"] not in {r["contact"]["id"] for r in started} and no_date

    # later the same day: no second pass; a year on: the same contacts again (after_exit)
    set_clock(morning + dt.timedelta(hours=5))
    next_year = morning.replace(year=morning.year + 1)
    set_clock(next_year + dt.timedelta(minutes=2))
    wait_until(lambda: len(runs(tenant, flow["id"], "completed")) == 4, what="next year's runs")
    assert len(runs(tenant, early["id"])) == 4
