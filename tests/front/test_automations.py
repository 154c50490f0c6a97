"""Automations over real HTTP: create with steps and defaults, read, list, status moves,
soft delete, step CRUD and the batch PUT, config validation with paths into the config,
the trigger endpoint's refusals, permissions and workspace scoping. (Runs moving through
their steps are tests/e2e/test_automation_*.py.)"""

import pytest

from pipelines.automations.steps import DEFAULT_CONFIGS
from tests.support.api import assert_error
from tests.support.audience import make_contact, make_list, make_tag
from tests.support.campaigns import make_template
from tests.support.forms import make_form


def create(tenant, **fields):
    body = {"name": "Welcome", "trigger_type": "api", **fields}
    response = tenant.post("/automations", json=body)
    assert response.status_code == 201, response.text
    return response.json()["data"]


def activate(tenant, automation_id):
    response = tenant.patch(f"/automations/{automation_id}", json={"status": "active"})
    assert response.status_code == 200, response.text
    return response.json()["data"]


def test_a_created_automation_is_a_draft_with_every_omitted_config_at_the_spec_defaults(tenant):
    steps = [{"step_type": kind} for kind in DEFAULT_CONFIGS]
    data = create(tenant, steps=steps)
    assert data["status"] == "draft" and data["trigger_type"] == "api"
    assert data["trigger_config"] == {"reentry": "never"}
    assert [s["step_type"] for s in data["steps"]] == list(DEFAULT_CONFIGS)
    assert [s["position"] for s in data["steps"]] == list(range(len(DEFAULT_CONFIGS)))
    by_type = {s["step_type"]: s["config"] for s in data["steps"]}
    # the spec's table, written out here rather than read from the code under test
    assert by_type["email"] == {"templateId": None, "subject": "", "previewText": ""}
    assert by_type["delay"] == {"duration": 1, "unit": "days"}
    assert by_type["condition"] == {"field": "", "operator": "equals", "value": "", "trueBranchStepId": None,
                                    "falseBranchStepId": None}
    assert by_type["tag"] == {"action": "add", "tagName": ""}
    assert by_type["add_to_list"] == by_type["remove_from_list"] == {"listId": None}
    assert by_type["update_attribute"] == {"attributeName": "", "attributeValue": ""}
    assert by_type["webhook"] == {"url": "", "method": "POST", "headers": {}, "body": None}
    assert by_type["wait_for_event"] == {"eventType": "email_opened", "timeoutDays": 7, "timeoutAction": "continue",
                                         "timeoutBranchStepId": None}
    assert by_type["move_to_flow"] == {"targetFlowId": "", "exitCurrentFlow": True}
    assert data["stats"] == {"active": 0, "completed": 0, "failed": 0, "paused": 0, "cancelled": 0, "total": 0}
    assert all(s["stats"] == {"at": 0, "passed": 0, "failed": 0} for s in data["steps"])

    fetched = tenant.get(f"/automations/{data['id']}").json()["data"]
    assert fetched["steps"] == data["steps"]


def test_given_config_fields_are_kept_and_the_rest_defaulted(tenant):
    data = create(tenant, steps=[{"step_type": "delay", "config": {"unit": "hours"}},
                                 {"step_type": "webhook", "config": {"url": "https://hooks.example/x",
                                                                     "body": {"id": "{{email}}"}}}])
    assert data["steps"][0]["config"] == {"duration": 1, "unit": "hours"}
    assert data["steps"][1]["config"] == {"url": "https://hooks.example/x", "method": "POST", "headers": {},
                                          "body": {"id": "{{email}}"}}


@pytest.mark.parametrize("step, path", [
    ({"step_type": "delay", "config": {"unit": "fortnights"}}, "steps[0].config.unit"),
    ({"step_type": "delay", "config": {"duration": 0}}, "steps[0].config.duration"),
    ({"step_type": "delay", "config": {"duration": "2"}}, "steps[0].config.duration"),
    ({"step_type": "delay", "config": {"duration": 400, "unit": "days"}}, "steps[0].config.duration"),
    ({"step_type": "delay", "config": {"minutes": 5}}, "steps[0].config.minutes"),
    ({"step_type": "condition", "config": {"operator": "like"}}, "steps[0].config.operator"),
    ({"step_type": "condition", "config": {"field": "subscribed", "operator": "contains", "value": True}},
     "steps[0].config.operator"),
    ({"step_type": "condition", "config": {"field": "bad field!"}}, "steps[0].config.field"),
    ({"step_type": "condition", "config": {"trueBranchStepId": "nowhere"}}, "steps[0].config.trueBranchStepId"),
    ({"step_type": "tag", "config": {"action": "toggle"}}, "steps[0].config.action"),
    ({"step_type": "update_attribute", "config": {"attributeName": "has space"}},
     "steps[0].config.attributeName"),
    ({"step_type": "webhook", "config": {"url": "ftp://x.example/"}}, "steps[0].config.url"),
    ({"step_type": "webhook", "config": {"method": "DELETE"}}, "steps[0].config.method"),
    ({"step_type": "webhook", "config": {"headers": {"X-A": 5}}}, "steps[0].config.headers.X-A"),
    ({"step_type": "webhook", "config": {"headers": {"Host": "x"}}}, "steps[0].config.headers.Host"),
    ({"step_type": "webhook", "config": {"body": {"a": {"b": "{{#if x}}"}}}}, "steps[0].config.body.a.b"),
    ({"step_type": "email", "config": {"subject": "Hi {{name|x|shout}}"}}, "steps[0].config.subject"),
    ({"step_type": "wait_for_event", "config": {"eventType": "replied"}}, "steps[0].config.eventType"),
    ({"step_type": "wait_for_event", "config": {"timeoutAction": "wait"}}, "steps[0].config.timeoutAction"),
    ({"step_type": "move_to_flow", "config": {"exitCurrentFlow": "yes"}}, "steps[0].config.exitCurrentFlow"),
    ({"step_type": "send_sms"}, "steps[0].step_type"),
    ({"step_type": "delay", "id": "has space"}, "steps[0].id"),
])
def test_a_bad_step_config_is_refused_with_its_path_and_nothing_is_stored(tenant, step, path):
    before = tenant.get("/automations").json()["pagination"]["total"]
    response = tenant.post("/automations", json={"name": "Bad", "trigger_type": "api", "steps": [step]})
    assert_error(response, 400, "validation_error", path)
    assert tenant.get("/automations").json()["pagination"]["total"] == before


@pytest.mark.e2e
def test_webhook_urls_the_outbound_guard_refuses_are_refused_at_save(service, tenant):
    # the shared test stack allows private targets; a front without that setting refuses them
    from tests.support.services import another_front
    env = {**service.env, "POSTROOM_ALLOW_PRIVATE_TARGETS": "0"}
    with another_front("front-guarded", env, service.log_dir) as base_url:
        client = service.client(tenant.key)
        for url in ("http://127.0.0.1:9/x", "http://169.254.169.254/latest", "http://localhost/x"):
            response = client.post(f"{base_url}/api/v1/automations", json={
                "name": "Guarded", "trigger_type": "api",
                "steps": [{"step_type": "webhook", "config": {"url": url}}]})
            assert_error(response, 400, "validation_error", "steps[0].config.url")


def test_branch_targets_must_be_steps_of_the_same_automation(tenant):
    other = create(tenant, steps=[{"id": "elsewhere", "step_type": "delay"}])
    response = tenant.post("/automations", json={"name": "B", "trigger_type": "api", "steps": [
        {"id": "check", "step_type": "condition", "config": {"field": "plan", "value": "pro",
                                                            "trueBranchStepId": other["steps"][0]["id"]}}]})
    assert_error(response, 400, "validation_error", "steps[0].config.trueBranchStepId")
    response = tenant.post("/automations", json={"name": "B", "trigger_type": "api", "steps": [
        {"id": "check", "step_type": "condition", "config": {"field": "plan", "trueBranchStepId": "check"}}]})
    assert_error(response, 400, "validation_error", "steps[0].config.trueBranchStepId")
    ok = create(tenant, steps=[
        {"id": "check", "step_type": "condition", "config": {"field": "plan", "value": "pro",
                                                            "trueBranchStepId": "vip", "falseBranchStepId": None}},
        {"step_type": "delay"}, {"id": "vip", "step_type": "tag", "config": {"tagName": "VIP"}}])
    assert ok["steps"][0]["config"]["trueBranchStepId"] == "vip" and ok["steps"][2]["id"] == "vip"
    assert_error(tenant.post("/automations", json={"name": "B", "trigger_type": "api", "steps": [
        {"id": "same", "step_type": "delay"}, {"id": "same", "step_type": "delay"}]}),
        400, "validation_error", "steps[1].id")


def test_move_to_flow_cannot_target_its_own_automation(tenant):
    data = create(tenant)
    response = tenant.post(f"/automations/{data['id']}/steps",
                           json={"step_type": "move_to_flow", "config": {"targetFlowId": data["id"]}})
    assert_error(response, 400, "validation_error", "config.targetFlowId")


@pytest.mark.parametrize("trigger_type, config, path", [
    ("list_joined", {}, "trigger_config.list_id"),
    ("date_attribute", {}, "trigger_config.attribute"),
    ("date_attribute", {"attribute": "birthday", "offset_days": 400}, "trigger_config.offset_days"),
    ("date_attribute", {"attribute": "birthday", "time_of_day": "25:00"}, "trigger_config.time_of_day"),
    ("form_submitted", {}, "trigger_config.form_id"),
    ("api", {"reentry": "sometimes"}, "trigger_config.reentry"),
    ("api", {"list_id": "x"}, "trigger_config.list_id"),
])
def test_trigger_configs_are_checked_per_trigger_type(tenant, trigger_type, config, path):
    response = tenant.post("/automations", json={"name": "T", "trigger_type": trigger_type, "trigger_config": config})
    assert_error(response, 400, "validation_error", path)


def test_unknown_trigger_type_is_refused(tenant):
    assert_error(tenant.post("/automations", json={"name": "T", "trigger_type": "moon_phase"}), 400, "validation_error",
          "trigger_type")
    assert_error(tenant.post("/automations", json={"trigger_type": "api"}), 400, "validation_error", "name")


def test_trigger_configs_get_their_defaults(tenant):
    tag = make_tag(tenant, "vip")
    members = make_list(tenant, "Members")
    assert create(tenant, trigger_type="date_attribute", trigger_config={"attribute": "birthday"})["trigger_config"] \
        == {"reentry": "after_exit", "attribute": "birthday", "offset_days": 0, "time_of_day": "09:00"}
    assert create(tenant, trigger_type="tag_added", trigger_config={"tag_id": tag["id"], "reentry": "always"}
                  )["trigger_config"] == {"reentry": "always", "tag_id": tag["id"]}
    assert create(tenant, trigger_type="list_joined", trigger_config={"list_id": members["id"]}
                  )["trigger_config"] == {"reentry": "never", "list_id": members["id"]}
    form = make_form(tenant, double_opt_in=False)
    assert create(tenant, trigger_type="form_submitted", trigger_config={"form_id": form["id"]}
                  )["trigger_config"] == {"reentry": "never", "form_id": form["id"]}


def test_status_moves_draft_active_paused_and_back_and_nothing_else(tenant):
    data = create(tenant, steps=[{"step_type": "delay"}])
    automation_id = data["id"]
    assert_error(tenant.patch(f"/automations/{automation_id}", json={"status": "paused"}), 409, "conflict")
    assert activate(tenant, automation_id)["status"] == "active"
    assert tenant.patch(f"/automations/{automation_id}", json={"status": "active"}).json()["data"]["status"] == "active"
    assert_error(tenant.patch(f"/automations/{automation_id}", json={"status": "draft"}), 409, "conflict")
    paused = tenant.patch(f"/automations/{automation_id}", json={"status": "paused", "name": "Renamed"})
    assert paused.status_code == 200 and paused.json()["data"]["status"] == "paused"
    assert paused.json()["data"]["name"] == "Renamed"
    assert_error(tenant.patch(f"/automations/{automation_id}", json={"status": "draft"}), 409, "conflict")
    assert activate(tenant, automation_id)["status"] == "active"
    assert_error(tenant.patch(f"/automations/{automation_id}", json={"status": "archived"}), 400, "validation_error",
          "status")
    assert_error(tenant.patch(f"/automations/{automation_id}", json={"steps": []}), 400, "validation_error", "steps")


def test_an_automation_with_an_incomplete_step_cannot_be_activated(tenant):
    template = make_template(tenant)
    data = create(tenant, steps=[{"step_type": "delay"},
                                 {"step_type": "email", "config": {"templateId": template["id"]}}])
    assert_error(tenant.patch(f"/automations/{data['id']}", json={"status": "active"}), 400, "validation_error",
          "steps[1].config.subject")
    patched = tenant.patch(f"/automations/{data['id']}/steps/{data['steps'][1]['id']}",
                           json={"config": {"subject": "Hi"}})
    assert patched.status_code == 200, patched.text
    active = activate(tenant, data["id"])
    # once it runs, a step cannot be made incomplete again
    response = tenant.patch(f"/automations/{data['id']}/steps/{active['steps'][1]['id']}",
                            json={"config": {"subject": ""}})
    assert_error(response, 400, "validation_error", "config.subject")
    response = tenant.post(f"/automations/{data['id']}/steps", json={"step_type": "tag"})
    assert_error(response, 400, "validation_error", "config.tagName")


def test_list_filters_by_status_and_pages(tenant):
    drafts = [create(tenant, name=f"d{i}") for i in range(3)]
    live = create(tenant, name="live", steps=[{"step_type": "delay"}])
    activate(tenant, live["id"])
    listed = tenant.get("/automations?status=draft&limit=2").json()
    assert listed["pagination"] == {"total": 3, "limit": 2, "offset": 0, "has_more": True}
    assert [a["id"] for a in listed["data"]] == [d["id"] for d in reversed(drafts)][:2]
    assert [a["id"] for a in tenant.get("/automations?status=active").json()["data"]] == [live["id"]]
    assert_error(tenant.get("/automations?status=running"), 400, "validation_error", "status")


def test_deleted_automation_is_gone_everywhere(tenant):
    data = create(tenant)
    response = tenant.delete(f"/automations/{data['id']}")
    assert response.status_code == 200 and response.json()["data"]["deleted"] is True
    for call in (lambda: tenant.get(f"/automations/{data['id']}"),
                 lambda: tenant.patch(f"/automations/{data['id']}", json={"name": "x"}),
                 lambda: tenant.delete(f"/automations/{data['id']}"),
                 lambda: tenant.get(f"/automations/{data['id']}/runs"),
                 lambda: tenant.post(f"/automations/{data['id']}/steps", json={"step_type": "delay"})):
        assert_error(call(), 404, "not_found")
    assert data["id"] not in [a["id"] for a in tenant.get("/automations").json()["data"]]


def test_steps_are_added_at_a_position_patched_moved_and_deleted_with_the_rest_reordered(tenant):
    data = create(tenant, steps=[{"id": "a", "step_type": "delay"}, {"id": "c", "step_type": "delay"}])
    base = f"/automations/{data['id']}/steps"
    added = tenant.post(base, json={"id": "b", "step_type": "tag", "config": {"tagName": "x"}, "position": 1})
    assert added.status_code == 201, added.text
    assert added.json()["data"] == {"id": "b", "step_type": "tag", "position": 1,
                                    "config": {"action": "add", "tagName": "x"}}
    last = tenant.post(base, json={"step_type": "delay", "position": 99}).json()["data"]
    assert last["position"] == 3
    order = lambda: [s["id"] for s in tenant.get(f"/automations/{data['id']}").json()["data"]["steps"]]  # noqa: E731
    assert order() == ["a", "b", "c", last["id"]]
    assert_error(tenant.post(base, json={"id": "a", "step_type": "delay"}), 400, "validation_error", "id")

    # config merges over the current one; a new type starts from that type's defaults
    merged = tenant.patch(f"{base}/b", json={"config": {"action": "remove"}}).json()["data"]
    assert merged["config"] == {"action": "remove", "tagName": "x"}
    retyped = tenant.patch(f"{base}/b", json={"step_type": "delay", "config": {"unit": "weeks"}}).json()["data"]
    assert retyped == {"id": "b", "step_type": "delay", "position": 1, "config": {"duration": 1, "unit": "weeks"}}
    moved = tenant.patch(f"{base}/a", json={"position": 2}).json()["data"]
    assert moved["position"] == 2 and order() == ["b", "c", "a", last["id"]]
    assert_error(tenant.patch(f"{base}/b", json={"config": {"unit": "days", "extra": 1}}), 400, "validation_error",
          "config.extra")
    assert_error(tenant.patch(f"{base}/nope", json={"config": {}}), 404, "not_found")

    assert tenant.delete(f"{base}/c").json()["data"] == {"id": "c", "deleted": True}
    steps = tenant.get(f"/automations/{data['id']}").json()["data"]["steps"]
    assert [(s["id"], s["position"]) for s in steps] == [("b", 0), ("a", 1), (last["id"], 2)]
    assert_error(tenant.delete(f"{base}/c"), 404, "not_found")


def test_a_step_another_branches_to_cannot_be_deleted(tenant):
    data = create(tenant, steps=[
        {"id": "check", "step_type": "condition",
         "config": {"field": "plan", "value": "x", "falseBranchStepId": "end"}},
        {"id": "end", "step_type": "delay"}])
    assert_error(tenant.delete(f"/automations/{data['id']}/steps/end"), 409, "conflict")


def test_put_replaces_the_whole_step_list_reordering_updating_adding_and_removing(tenant):
    data = create(tenant, steps=[{"id": "a", "step_type": "delay"}, {"id": "b", "step_type": "tag",
                                                                      "config": {"tagName": "old"}},
                                 {"id": "c", "step_type": "delay"}])
    response = tenant.put(f"/automations/{data['id']}/steps", json={"steps": [
        {"id": "b", "config": {"tagName": "new"}},
        {"id": "n", "step_type": "email", "config": {"subject": "Hi"}},
        {"id": "a", "config": {"unit": "hours"}},
    ]})
    assert response.status_code == 200, response.text
    steps = response.json()["data"]["steps"]
    assert [(s["id"], s["step_type"], s["position"]) for s in steps] == [
        ("b", "tag", 0), ("n", "email", 1), ("a", "delay", 2)]
    assert steps[0]["config"] == {"action": "add", "tagName": "new"}
    assert steps[2]["config"] == {"duration": 1, "unit": "hours"}
    assert_error(tenant.put(f"/automations/{data['id']}/steps", json={"steps": [{"id": "zz"}]}),
                 400, "validation_error", "steps[0].step_type")
    assert_error(tenant.put(f"/automations/{data['id']}/steps", json={"steps": [{"step_type": "delay",
                                                                           "config": {"unit": "ms"}}]}),
          400, "validation_error", "steps[0].config.unit")
    assert [s["id"] for s in tenant.get(f"/automations/{data['id']}").json()["data"]["steps"]] == ["b", "n", "a"]


def test_trigger_endpoint_refusals(tenant):
    contact = make_contact(tenant, "trig@example.org")
    draft = create(tenant, steps=[{"step_type": "delay"}])
    assert_error(tenant.post(f"/automations/{draft['id']}/trigger", json={"contact_id": contact["id"]}),
                 409, "conflict")
    activate(tenant, draft["id"])
    assert_error(tenant.post(f"/automations/{draft['id']}/trigger", json={"contact_id": "nobody"}), 404,
          "contact_not_found", "contact_id")
    assert_error(tenant.post(f"/automations/{draft['id']}/trigger", json={"email": "nobody@example.org"}), 404,
          "contact_not_found", "email")
    assert_error(tenant.post(f"/automations/{draft['id']}/trigger", json={}), 400, "validation_error", "contact_id")
    assert_error(tenant.post(f"/automations/{draft['id']}/trigger", json={"contact_id": contact["id"],
                                                                   "email": contact["email"]}),
          400, "validation_error", "email")
    assert_error(tenant.post(f"/automations/{draft['id']}/trigger", json={"email": "TRIG@example.org",
                                                                   "trigger_data": "x"}),
          400, "validation_error", "trigger_data")
    assert_error(tenant.post("/automations/nope/trigger", json={"contact_id": contact["id"]}), 404, "not_found")
    assert_error(tenant.post(f"/automations/{draft['id']}/runs/nope/cancel"), 404, "not_found")


def test_another_workspace_sees_nothing_of_an_automation(service, tenant):
    data = create(tenant, steps=[{"id": "s", "step_type": "delay"}])
    other = service.tenant()
    for response in (other.get(f"/automations/{data['id']}"),
                     other.patch(f"/automations/{data['id']}", json={"name": "mine"}),
                     other.delete(f"/automations/{data['id']}"),
                     other.post(f"/automations/{data['id']}/steps", json={"step_type": "delay"}),
                     other.put(f"/automations/{data['id']}/steps", json={"steps": []}),
                     other.patch(f"/automations/{data['id']}/steps/s", json={"config": {}}),
                     other.delete(f"/automations/{data['id']}/steps/s"),
                     other.post(f"/automations/{data['id']}/trigger", json={"email": "x@example.org"}),
                     other.get(f"/automations/{data['id']}/runs")):
        assert_error(response, 404, "not_found")
    assert other.get("/automations").json()["data"] == []
    # nor can a step name another workspace's template or automation: 404, as every cross-reference
    template = make_template(tenant)
    assert_error(other.post("/automations", json={"name": "x", "trigger_type": "api", "steps": [
        {"step_type": "email", "config": {"templateId": template["id"]}}]}), 404, "not_found",
        "steps[0].config.templateId")
    assert_error(other.post("/automations", json={"name": "x", "trigger_type": "api", "steps": [
        {"step_type": "move_to_flow", "config": {"targetFlowId": data["id"]}}]}), 404, "not_found",
        "steps[0].config.targetFlowId")


def test_a_form_trigger_and_condition_steps_name_only_this_workspaces_forms_tags_and_lists(service, tenant):
    other = service.tenant()
    form = make_form(other, double_opt_in=False)
    tag = make_tag(other, "theirs")
    theirs = make_list(other, "Theirs")
    before = tenant.get("/automations").json()["pagination"]["total"]
    assert_error(tenant.post("/automations", json={"name": "x", "trigger_type": "form_submitted",
                                                   "trigger_config": {"form_id": form["id"]}}),
                 404, "not_found", "trigger_config.form_id")
    for field, ref in (("tags", tag["id"]), ("lists", theirs["id"]), ("tags", "no-such-tag")):
        condition = {"field": field, "operator": "equals", "value": ref}
        assert_error(tenant.post("/automations", json={"name": "x", "trigger_type": "api", "steps": [
            {"step_type": "condition", "config": condition}]}), 404, "not_found", "steps[0].config.value")
    assert tenant.get("/automations").json()["pagination"]["total"] == before
    draft = create(tenant, steps=[{"id": "c", "step_type": "condition"}])
    assert_error(tenant.patch(f"/automations/{draft['id']}/steps/c", json={"config": {
        "field": "tags", "operator": "equals", "value": tag["id"]}}), 404, "not_found", "config.value")
    assert_error(tenant.patch(f"/automations/{draft['id']}", json={
        "trigger_type": "form_submitted", "trigger_config": {"form_id": form["id"]}}), 404, "not_found",
        "trigger_config.form_id")
    # their own: accepted (a dynamic list is not: membership of those is not stored)
    mine, mine_list = make_form(tenant, double_opt_in=False), make_list(tenant, "Mine")
    my_tag = make_tag(tenant, "mine")
    dynamic = make_list(tenant, "Dyn", type="dynamic",
                        conditions={"rules": [{"field": "email", "operator": "contains", "value": "@"}]})
    created = tenant.post("/automations", json={
        "name": "ok", "trigger_type": "form_submitted", "trigger_config": {"form_id": mine["id"]}, "steps": [
            {"step_type": "condition", "config": {"field": "tags", "operator": "equals", "value": my_tag["id"]}},
            {"step_type": "condition", "config": {"field": "lists", "operator": "not_equals",
                                                  "value": mine_list["id"]}}]})
    assert created.status_code == 201, created.text
    assert_error(tenant.post("/automations", json={"name": "x", "trigger_type": "api", "steps": [
        {"step_type": "condition", "config": {"field": "lists", "operator": "equals", "value": dynamic["id"]}}]}),
        400, "validation_error", "steps[0].config.value")


@pytest.mark.parametrize("body, path", [
    ({"trigger_type": "api", "steps": [{"step_type": "email", "config": {"templateId": "no-such-template"}}]},
     "steps[0].config.templateId"),
    ({"trigger_type": "api", "steps": [{"step_type": "move_to_flow", "config": {"targetFlowId": "no-such-flow"}}]},
     "steps[0].config.targetFlowId"),
    ({"trigger_type": "api", "steps": [{"step_type": "add_to_list", "config": {"listId": "no-such-list"}}]},
     "steps[0].config.listId"),
    ({"trigger_type": "list_joined", "trigger_config": {"list_id": "no-such-list"}}, "trigger_config.list_id"),
    ({"trigger_type": "tag_added", "trigger_config": {"tag_id": "no-such-tag"}}, "trigger_config.tag_id"),
    ({"trigger_type": "email_opened", "trigger_config": {"campaign_id": "no-such-campaign"}},
     "trigger_config.campaign_id"),
    ({"trigger_type": "form_submitted", "trigger_config": {"form_id": "no-such-form"}}, "trigger_config.form_id"),
])
def test_a_reference_to_nothing_in_the_workspace_is_404_with_its_path(tenant, body, path):
    assert_error(tenant.post("/automations", json={"name": "Bad", **body}), 404, "not_found", path)


def test_permissions_automations_read_and_write(service, tenant):
    data = create(tenant)
    reader = service.extra_key(tenant, permissions=["automations:read"])
    assert reader.get(f"/automations/{data['id']}").status_code == 200
    assert reader.get(f"/automations/{data['id']}/runs").status_code == 200
    assert_error(reader.post("/automations", json={"name": "x", "trigger_type": "api"}), 403, "forbidden")
    assert_error(reader.patch(f"/automations/{data['id']}", json={"name": "x"}), 403, "forbidden")
    assert_error(reader.post(f"/automations/{data['id']}/trigger", json={"email": "a@example.org"}), 403, "forbidden")
    writer = service.extra_key(tenant, permissions=["automations:write"])
    assert_error(writer.get("/automations"), 403, "forbidden")
    assert writer.patch(f"/automations/{data['id']}", json={"name": "ok"}).status_code == 200
    stranger = service.extra_key(tenant, permissions=["contacts:*"])
    assert_error(stranger.get("/automations"), 403, "forbidden")
