"""Automation step semantics as plain code: config defaults and checks, what a step needs to
run, next-step resolution, condition evaluation (with a segment rule's meaning), and the
webhook step's request."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.automations import steps
from pipelines.core.errors import ValidationFailed


def failure(call) -> ValidationFailed:
    with pytest.raises(ValidationFailed) as caught:
        call()
    return caught.value


def test_an_omitted_config_is_the_types_defaults_and_given_fields_replace_them():
    assert steps.normalize_config("delay", None) == {"duration": 1, "unit": "days"}
    assert steps.normalize_config("delay", {"unit": "hours"}) == {"duration": 1, "unit": "hours"}
    base = {"duration": 3, "unit": "weeks"}
    assert steps.normalize_config("delay", {"duration": 2}, base=base) == {"duration": 2, "unit": "weeks"}
    assert base == {"duration": 3, "unit": "weeks"}  # the stored config is not changed in place


def test_defaults_are_fresh_copies():
    first = steps.normalize_config("webhook", None)
    first["headers"]["X"] = "y"
    assert steps.normalize_config("webhook", None)["headers"] == {}


@pytest.mark.parametrize("step_type, config, path", [
    ("delay", {"duration": True}, "config.duration"),
    ("delay", {"duration": -1}, "config.duration"),
    ("delay", {"duration": 53, "unit": "weeks"}, "config.duration"),
    ("wait_for_event", {"timeoutDays": 367}, "config.timeoutDays"),
    ("condition", {"field": "email", "operator": "gt", "value": ""}, "config.value"),
    ("condition", {"value": [1, 2]}, "config.value"),
    ("tag", {"tagName": "x" * 51}, "config.tagName"),
    ("email", {"templateId": ""}, "config.templateId"),
    ("email", {"previewText": "{{#each}}"}, "config.previewText"),
    ("webhook", {"headers": {"Bad Name": "x"}}, "config.headers.Bad Name"),
    ("webhook", {"headers": {"X-Ok": "a\r\nInjected: 1"}}, "config.headers.X-Ok"),
    ("webhook", {"body": ["a"]}, "config.body"),
    ("webhook", {"body": {"list": [{"deep": "{{/if}}"}]}}, "config.body.list[0].deep"),
    ("webhook", {"url": "https://user:pw@host.example/"}, "config.url"),
    ("move_to_flow", {"targetFlowId": 5}, "config.targetFlowId"),
])
def test_bad_fields_name_their_path(step_type, config, path):
    assert failure(lambda: steps.normalize_config(step_type, config)).path == path


def test_paths_of_a_body_own_step_have_no_prefix():
    assert steps.field_path("", "config") == "config"
    assert steps.field_path("steps[2]", "config") == "steps[2].config"
    error = failure(lambda: steps.normalize_config("delay", {"unit": "x"}, steps.field_path("steps[2]", "config")))
    assert error.path == "steps[2].config.unit"


def test_what_a_step_needs_before_its_automation_runs():
    def step(kind, **config):
        return {"id": "s", "step_type": kind, "config": steps.normalize_config(kind, config)}
    assert steps.runnable_problem(step("delay")) is None
    assert steps.runnable_problem(step("email"))[0] == "templateId"
    assert steps.runnable_problem(step("email", templateId="t"))[0] == "subject"
    assert steps.runnable_problem(step("email", templateId="t", subject="Hi")) is None
    assert steps.runnable_problem(step("wait_for_event", timeoutAction="branch"))[0] == "timeoutBranchStepId"
    for kind, field in (("condition", "field"), ("tag", "tagName"), ("add_to_list", "listId"),
                        ("remove_from_list", "listId"), ("update_attribute", "attributeName"),
                        ("webhook", "url"), ("move_to_flow", "targetFlowId")):
        assert steps.runnable_problem(step(kind))[0] == field


FLOW = [{"id": i, "step_type": "delay", "config": {}} for i in ("a", "b", "c", "d")]


def test_next_steps_skips_and_branches():
    assert steps.step_after(FLOW, "a") == "b"
    assert steps.step_after(FLOW, "a", skip=1) == "c"
    assert steps.step_after(FLOW, "d") is None
    assert steps.step_after(FLOW, "c", skip=1) is None
    assert steps.branch_or_next(FLOW, "a", "d") == "d"
    assert steps.branch_or_next(FLOW, "a", None) == "b"
    assert steps.branch_or_next(FLOW, "a", "gone") == "b"


def test_branches_must_name_other_steps_of_the_flow():
    flow = [{"id": "a", "step_type": "condition", "config": {"trueBranchStepId": "b", "falseBranchStepId": None}},
            {"id": "b", "step_type": "delay", "config": {}}]
    steps.check_branches(flow, lambda i: f"steps[{i}]")
    flow[0]["config"]["falseBranchStepId"] = "a"
    assert failure(lambda: steps.check_branches(flow, lambda i: f"steps[{i}]")).path == \
        "steps[0].config.falseBranchStepId"


CONTACT = {"email": "Ann@example.org", "email_key": "ann@example.org", "first_name": "Ann", "last_name": None,
           "subscribed": 1, "bounced": False,
           "tags": ["t1"], "lists": [], "created_at": "2024-01-01T00:00:00.000000Z",
           "attributes": {"plan": "Pro", "age": 30, "score": 1.5, "vip": True}}


def holds(field, operator, value):
    return steps.condition_holds(CONTACT, {"field": field, "operator": operator, "value": value})


@pytest.mark.parametrize("field, operator, value, expected", [
    ("plan", "equals", "Pro", True),
    ("plan", "equals", "pro", False),            # exact, as a segment's equals
    ("attributes.plan", "equals", "Pro", True),
    ("plan", "contains", "ro", True),
    ("plan", "contains", "PR", True),            # contains is case-insensitive
    ("email", "equals", "ANN@example.org", True),  # email compares case-insensitively
    ("age", "gt", 29, True), ("age", "gte", 30, True), ("age", "lt", 30, False), ("age", "lte", 30, True),
    ("age", "gt", "29", False),                  # no cross-type comparison (MongoDB's type bracketing)
    ("score", "lt", 2, True),
    ("vip", "equals", True, True), ("vip", "equals", "true", False),
    ("subscribed", "equals", True, True),        # the store's 0/1 reads as a boolean
    ("missing", "not_equals", "x", True),        # not_equals holds when the field is missing
    ("missing", "equals", "", False),
    ("plan", "not_equals", "Pro", False),
    ("tags", "equals", "t1", True), ("tags", "contains", "t2", False), ("tags", "not_equals", "t2", True),
    ("first_name", "gt", "Al", True), ("last_name", "contains", "x", False),
])
def test_condition_has_the_meaning_of_a_segment_rule(field, operator, value, expected):
    assert holds(field, operator, value) is expected


@given(st.integers(-1000, 1000), st.integers(-1000, 1000))
def test_numeric_comparisons_agree_with_python(actual, wanted):
    contact = {"attributes": {"n": actual}}
    for operator, expected in (("gt", actual > wanted), ("gte", actual >= wanted), ("lt", actual < wanted),
                               ("lte", actual <= wanted), ("equals", actual == wanted)):
        assert steps.condition_holds(contact, {"field": "n", "operator": operator, "value": wanted}) is expected


def webhook_config(**config):
    return steps.normalize_config("webhook", {"url": "https://hooks.example/x", **config})


def test_an_object_body_is_json_with_merge_tags_filled_in_its_strings():
    body, headers = steps.webhook_request(webhook_config(body={"who": "{{email}}", "n": 3, "tags": ["{{plan}}"]}),
                                          data={"email": 'a"b@example.org', "plan": "pro"}, default_body={},
                                          delivery_id="run:s:1")
    assert json.loads(body) == {"who": 'a"b@example.org', "n": 3, "tags": ["pro"]}
    assert headers == {"X-Postroom-Delivery-Id": "run:s:1", "Content-Type": "application/json"}


def test_string_bodies_get_a_content_type_by_what_they_are_and_get_sends_none():
    text, headers = steps.webhook_request(webhook_config(body="hi {{first_name}}"), data={"first_name": "Ann"},
                                          default_body={}, delivery_id="d")
    assert text == b"hi Ann" and headers["Content-Type"].startswith("text/plain")
    raw, headers = steps.webhook_request(webhook_config(body='{"a": 1}', headers={"content-type": "application/x"}),
                                         data={}, default_body={}, delivery_id="d")
    assert raw == b'{"a": 1}' and headers["content-type"] == "application/x" and "Content-Type" not in headers
    none, _ = steps.webhook_request(webhook_config(method="GET", body={"a": 1}), data={}, default_body={},
                                    delivery_id="d")
    assert none is None
    default, _ = steps.webhook_request(webhook_config(), data={}, default_body={"run_id": "r"}, delivery_id="d")
    assert json.loads(default) == {"run_id": "r"}


def test_the_preview_text_is_a_hidden_first_line_of_the_body():
    from pipelines.templates.preheader import with_preheader
    html = with_preheader('<html><body class="x"><p>Hi</p></body></html>', "Sale <today> & more")
    assert html.startswith('<html><body class="x"><div style="display:none;')
    assert "Sale &lt;today&gt; &amp; more</div><p>Hi</p>" in html
    assert with_preheader("<p>Hi</p>", "First").startswith('<div style="display:none;')
    assert with_preheader("<p>Hi</p>", "  ") == "<p>Hi</p>"
