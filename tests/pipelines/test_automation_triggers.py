"""Triggers and runs as plain code: trigger configs, which event fires which automation for
which contact, run ids, anniversaries, and the run state machine's transitions."""

import datetime as dt
import re

import pytest

from pipelines.automations import runs, triggers
from pipelines.core.errors import ValidationFailed


def automation(kind, **config):
    return {"_id": "a1", "workspace_id": "w1", "trigger_type": kind, "name": "Flow", "status": "active",
            "trigger_config": triggers.normalize_trigger_config(kind, config), "steps": []}


def event(name, **data):
    return {"_id": "e1", "workspace_id": "w1", "event": name, "data": data, "timestamp": "2025-01-01T00:00:00.000000Z"}


def test_every_trigger_type_has_a_config_and_a_reentry_default():
    for kind in triggers.TRIGGER_TYPES:
        needs = {"list_joined": {"list_id": "l"}, "tag_added": {"tag_id": "t"}, "form_submitted": {"form_id": "f"},
                 "date_attribute": {"attribute": "birthday"}}.get(kind, {})
        config = triggers.normalize_trigger_config(kind, needs)
        assert config["reentry"] == ("after_exit" if kind == "date_attribute" else "never")
    with pytest.raises(ValidationFailed) as caught:
        triggers.normalize_trigger_config("date_attribute", {"attribute": "birthday", "offset_days": 1.5})
    assert caught.value.path == "trigger_config.offset_days"


@pytest.mark.parametrize("kind, config, fired, data, expected", [
    ("contact_created", {}, "contact.created", {"contact": {"id": "c1"}}, True),
    ("contact_created", {}, "contact.updated", {"contact": {"id": "c1"}}, False),
    ("list_joined", {"list_id": "l1"}, "list.member_added", {"list": {"id": "l1"}}, True),
    ("list_joined", {"list_id": "l1"}, "list.member_added", {"list": {"id": "l2"}}, False),
    ("list_joined", {"list_id": "l1"}, "list.member_removed", {"list": {"id": "l1"}}, False),
    ("tag_added", {"tag_id": "t1"}, "contact.tag_added", {"tag": {"id": "t1"}}, True),
    ("tag_added", {"tag_id": "t1"}, "contact.tag_added", {"tag": {"id": "t9"}}, False),
    ("email_opened", {}, "email.opened", {}, True),
    ("email_opened", {"campaign_id": "k1"}, "email.opened", {"campaign_id": "k2"}, False),
    ("email_opened", {"campaign_id": "k1"}, "email.opened", {"campaign_id": "k1"}, True),
    ("email_clicked", {}, "email.opened", {}, False),
    ("product_viewed", {"product_id": "p1"}, "product.viewed", {"product": {"product_id": "p1"}}, True),
    ("product_viewed", {"product_id": "p1"}, "product.viewed", {"product": {"product_id": "p2"}}, False),
    ("conversion_created", {}, "conversion.created", {"conversion": {}}, True),
    ("form_submitted", {"form_id": "f1"}, "form.submitted", {"form": {"id": "f1"}}, True),
    ("form_submitted", {"form_id": "f1"}, "form.submitted", {"form_id": "f1"}, True),
    ("form_submitted", {"form_id": "f1"}, "form.submitted", {"form": {"id": "f2"}}, False),
    ("api", {}, "contact.created", {}, False),
])
def test_which_events_fire_which_automations(kind, config, fired, data, expected):
    assert triggers.trigger_matches(automation(kind, **config), event(fired, **data)) is expected


def test_an_event_of_another_workspace_fires_nothing():
    other = {**event("contact.created"), "workspace_id": "w2"}
    assert not triggers.trigger_matches(automation("contact_created"), other)


def test_a_template_filter_reads_the_opened_message():
    flow = automation("email_opened", template_id="tpl")
    assert triggers.trigger_matches(flow, event("email.opened"), {"template_id": "tpl"})
    assert not triggers.trigger_matches(flow, event("email.opened"), {"template_id": "other"})
    assert not triggers.trigger_matches(flow, event("email.opened"), None)


def test_the_contact_an_event_concerns():
    assert triggers.event_contact(event("contact.created", contact={"id": "c1", "email": "a@x.org"})) \
        == ("c1", "a@x.org")
    conversion = {"contact_id": "c2", "contact_email": "b@x.org"}
    assert triggers.event_contact(event("conversion.created", conversion=conversion)) == ("c2", "b@x.org")
    assert triggers.event_contact(event("product.viewed", contact_id="c3", contact_email="c@x.org")) \
        == ("c3", "c@x.org")
    assert triggers.event_contact(event("email.opened"), {"contact_id": None, "to": ["d@x.org"]}) == (None, "d@x.org")
    assert triggers.event_contact(event("email.opened"), None) == (None, None)
    assert triggers.event_contact(event("form.submitted", email="e@x.org")) == (None, "e@x.org")


def test_run_ids_are_one_per_trigger_and_one_per_contact_with_never():
    assert triggers.run_id("a", "c", "e1") == triggers.run_id("a", "c", "e1")
    assert triggers.run_id("a", "c", "e1") != triggers.run_id("a", "c", "e2")
    assert triggers.run_source("never", "e1") == triggers.run_source("never", "e2")
    assert triggers.run_source("always", "e1") != triggers.run_source("always", "e2")


@pytest.mark.parametrize("today, offset, stored, expected", [
    (dt.date(2025, 6, 15), 0, "1990-06-15", True),
    (dt.date(2025, 6, 15), 0, "1990-06-15T08:00:00Z", True),
    (dt.date(2025, 6, 15), 0, "1990-06-16", False),
    (dt.date(2025, 6, 15), 0, "1990-06-150", False),
    (dt.date(2025, 6, 14), -1, "1990-06-15", True),   # the day before
    (dt.date(2025, 6, 22), 7, "1990-06-15", True),    # a week after
    (dt.date(2025, 2, 28), 0, "1992-02-29", True),    # no 29 February this year: on the 28th
    (dt.date(2024, 2, 28), 0, "1992-02-29", False),   # a leap year has its own 29th
    (dt.date(2024, 2, 29), 0, "1992-02-29", True),
    (dt.date(2026, 1, 1), 1, "1990-12-31", True),     # across the new year
])
def test_anniversaries(today, offset, stored, expected):
    assert bool(re.search(triggers.anniversary_pattern(today, offset), stored)) is expected


def test_the_daily_pass_waits_for_its_time_of_day():
    morning = dt.datetime(2025, 6, 15, 8, 59, tzinfo=dt.UTC)
    assert not triggers.anniversary_pass_due(morning, "09:00")
    assert triggers.anniversary_pass_due(morning.replace(hour=9), "09:00")


# -- the run state machine --------------------------------------------------------------------

STEP = {"id": "s1", "step_type": "tag"}


def new_run():
    return runs.new_run(run_id="r1", automation={**automation("api"), "steps": [STEP]},
                        contact={"_id": "c1", "email": "a@x.org"}, trigger={"type": "api", "data": {}},
                        first_step="s1", now=dt.datetime(2025, 1, 1, tzinfo=dt.UTC))


def test_a_new_run_is_ready_at_the_first_step_and_handed_off():
    run = new_run()
    assert (run["status"], run["phase"], run["step_id"], run["version"], run["seq"]) == ("active", "ready", "s1", 0, 0)
    assert run["wake_ms"] == runs.to_ms(dt.datetime(2025, 1, 1, tzinfo=dt.UTC)) + 60_000


def test_a_transition_bumps_the_version_and_the_step_counter_and_records_history():
    run = new_run()
    update = runs.transition(run, runs.Move(runs.entry(STEP, "tagged"), step_id="s2"))
    after = runs.applied(run, update)
    assert (after["version"], after["seq"], after["step_id"], after["phase"]) == (1, 1, "s2", "ready")
    assert after["history"][0]["outcome"] == "tagged" and after["history"][0]["seq"] == 0
    assert after["passed_steps"] == ["s1"]


def test_waiting_keeps_the_step_and_resets_the_hop_count():
    run = {**new_run(), "hops": 7}
    update = runs.transition(run, runs.Move(runs.entry(STEP, "waiting"), step_id="s1", phase="waiting",
                                            wake_ms=123, passed=False, new_step=False))
    after = runs.applied(run, update)
    assert (after["seq"], after["wake_ms"], after["hops"], after["passed_steps"]) == (0, 123, 0, [])


@pytest.mark.parametrize("move, status, step_id", [
    (runs.Move(runs.entry(STEP, "tagged"), step_id=None), "completed", ""),
    (runs.Move(runs.entry(STEP, "failed"), status="failed", passed=False, error="x"), "failed", "s1"),
    (runs.Move(runs.entry(STEP, "cancelled"), status="cancelled", passed=False), "cancelled", ""),
])
def test_an_ending_move_ends_the_run_and_nothing_is_due(move, status, step_id):
    after = runs.applied(new_run(), runs.transition(new_run(), move))
    assert (after["status"], after["step_id"], after["wake_ms"]) == (status, step_id, runs.NEVER_MS)
    assert after["ended_at"]


def test_the_email_message_id_is_one_per_run_step_and_visit():
    assert runs.email_message_id("r1", "s1", 0) == runs.email_message_id("r1", "s1", 0)
    assert len({runs.email_message_id("r1", "s1", 0), runs.email_message_id("r1", "s1", 1),
                runs.email_message_id("r2", "s1", 0), runs.email_message_id("r1", "s2", 0)}) == 4
