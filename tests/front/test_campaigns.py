"""Campaign resources over real HTTP: create (validation, references, idempotency),
list with a status filter, read with stats and rates, schedule, cancel, and the guards of
send (the flow of sending itself is in tests/e2e/test_campaign_send.py)."""

import datetime as dt
import uuid

import pytest

from tests.support.api import assert_error
from tests.support.audience import make_list
from tests.support.campaigns import make_campaign, make_template, send


@pytest.fixture
def template(tenant):
    return make_template(tenant)


@pytest.fixture
def members(tenant):
    return make_list(tenant, "Members")


def test_a_new_campaign_is_a_draft_with_zero_stats_and_tracking_on(tenant, template, members):
    campaign = make_campaign(tenant, template_id=template["id"], list_id=members["id"])
    assert campaign["status"] == "draft"
    assert campaign["list_id"] == members["id"] and campaign["segment_id"] is None
    assert campaign["track_opens"] is True and campaign["track_clicks"] is True
    for name in ("sent", "delivered", "opened", "clicked", "bounced", "complained", "unsubscribed",
                 "opens_total", "clicks_total"):
        assert campaign["stats"][name] == 0
    assert set(campaign["rates"]) >= {"delivery_rate", "open_rate", "click_rate", "bounce_rate",
                                      "unsubscribe_rate"}
    assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["name"] == "Spring"


def test_a_campaign_for_a_segment_can_turn_tracking_off(tenant, template):
    segment = tenant.post("/segments", json={"name": "Adults", "conditions": {
        "match": "all", "rules": [{"field": "age", "operator": "gte", "value": 18}]}}).json()["data"]
    campaign = make_campaign(tenant, template_id=template["id"], segment_id=segment["id"],
                             track_opens=False, track_clicks=False)
    assert campaign["segment_id"] == segment["id"] and campaign["list_id"] is None
    assert campaign["track_opens"] is False and campaign["track_clicks"] is False


def test_both_or_neither_of_list_and_segment_is_refused(tenant, template, members):
    base = {"name": "x", "subject": "s", "template_id": template["id"]}
    assert_error(tenant.post("/campaigns", json=base), 400, "validation_error", "list_id")
    assert_error(tenant.post("/campaigns", json={**base, "list_id": members["id"], "segment_id": "seg"}),
          400, "validation_error", "segment_id")


@pytest.mark.parametrize("missing", ["name", "subject", "template_id"])
def test_required_fields_are_required(tenant, template, members, missing):
    body = {"name": "x", "subject": "s", "template_id": template["id"], "list_id": members["id"]}
    del body[missing]
    assert_error(tenant.post("/campaigns", json=body), 400, "validation_error", missing)


@pytest.mark.parametrize("field,value", [
    ("name", ""), ("name", "n" * 201), ("subject", 5), ("template_id", ""), ("track_opens", "yes"),
    ("from_email", "not-an-address"), ("list_id", ["a"]), ("status", "sent"),
    ("from_name", "Acme\r\nBcc: victim@example.org"), ("from_name", "Acme\x1b"), ("from_name", "n" * 201),
    ("reply_to", "a@example.org\r\nBcc: b@example.org"),
])
def test_bad_fields_are_refused_with_their_path(tenant, template, members, field, value):
    body = {"name": "x", "subject": "s", "template_id": template["id"], "list_id": members["id"], field: value}
    assert_error(tenant.post("/campaigns", json=body), 400, "validation_error", field)


def test_malformed_json_is_a_validation_error(tenant):
    response = tenant.post("/campaigns", content=b'{"name": ', headers={"Content-Type": "application/json"})
    assert_error(response, 400, "validation_error")


def test_unknown_or_foreign_references_answer_404_with_the_right_code(service, tenant, template, members):
    base = {"name": "x", "subject": "s"}
    assert_error(tenant.post("/campaigns", json={**base, "template_id": "nope", "list_id": members["id"]}),
          404, "template_not_found", "template_id")
    assert_error(tenant.post("/campaigns", json={**base, "template_id": template["id"], "list_id": "nope"}),
          404, "not_found", "list_id")
    assert_error(tenant.post("/campaigns", json={**base, "template_id": template["id"], "segment_id": "nope"}),
          404, "not_found", "segment_id")
    other = service.tenant()
    theirs_template, theirs_list = make_template(other), make_list(other, "Theirs")
    assert_error(tenant.post("/campaigns",
                             json={**base, "template_id": theirs_template["id"], "list_id": members["id"]}),
                 404, "template_not_found")
    assert_error(tenant.post("/campaigns", json={**base, "template_id": template["id"], "list_id": theirs_list["id"]}),
          404, "not_found")


def test_a_workspace_without_a_default_sender_needs_from_email(service, template):
    tenant = service.tenant(from_email=None)
    own_template, own_list = make_template(tenant), make_list(tenant, "L")
    body = {"name": "x", "subject": "s", "template_id": own_template["id"], "list_id": own_list["id"]}
    assert_error(tenant.post("/campaigns", json=body), 400, "missing_from_email", "from_email")
    assert tenant.post("/campaigns", json={**body, "from_email": "news@acme.example"}).status_code == 201


def test_create_replays_with_the_same_idempotency_key_and_refuses_another_body(tenant, template, members):
    body = {"name": "Once", "subject": "s", "template_id": template["id"], "list_id": members["id"]}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    first = tenant.post("/campaigns", json=body, headers=headers)
    again = tenant.post("/campaigns", json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.headers["X-Idempotency-Status"] == "new" and again.headers["X-Idempotency-Status"] == "cached"
    assert first.json()["data"]["id"] == again.json()["data"]["id"]
    assert_error(tenant.post("/campaigns", json={**body, "name": "Other"}, headers=headers),
                 409, "idempotency_conflict")
    names = [c["name"] for c in tenant.get("/campaigns").json()["data"]]
    assert names.count("Once") == 1


def test_campaigns_are_listed_by_status_with_pagination_and_only_for_the_workspace(service, tenant, template, members):
    drafts = [make_campaign(tenant, template_id=template["id"], list_id=members["id"], name=f"c{i}")
              for i in range(3)]
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).isoformat()
    assert tenant.post(f"/campaigns/{drafts[0]['id']}/schedule", json={"send_at": later}).status_code == 200
    other = service.tenant()
    make_campaign(other, template_id=make_template(other)["id"], list_id=make_list(other, "L")["id"])
    everything = tenant.get("/campaigns").json()
    assert everything["pagination"]["total"] == 3
    only_drafts = tenant.get("/campaigns", params={"status": "draft", "limit": 1}).json()
    assert only_drafts["pagination"] == {"total": 2, "limit": 1, "offset": 0, "has_more": True}
    assert only_drafts["data"][0]["status"] == "draft"
    scheduled = tenant.get("/campaigns", params={"status": "scheduled"}).json()["data"]
    assert [c["id"] for c in scheduled] == [drafts[0]["id"]]
    assert_error(tenant.get("/campaigns", params={"status": "archived"}), 400, "validation_error", "status")


def test_unknown_and_foreign_campaigns_answer_404(service, tenant):
    other = service.tenant()
    theirs = make_campaign(other, template_id=make_template(other)["id"], list_id=make_list(other, "L")["id"])
    for path in (f"/campaigns/{theirs['id']}", "/campaigns/nope"):
        assert_error(tenant.get(path), 404, "not_found")
    assert_error(send(tenant, theirs["id"]), 404, "not_found")
    assert_error(tenant.post(f"/campaigns/{theirs['id']}/cancel"), 404, "not_found")
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    assert_error(tenant.post(f"/campaigns/{theirs['id']}/schedule", json={"send_at": later}), 404, "not_found")


def test_send_requires_the_idempotency_key_header(tenant, template, members):
    campaign = make_campaign(tenant, template_id=template["id"], list_id=members["id"])
    assert_error(tenant.post(f"/campaigns/{campaign['id']}/send/api"), 400, "validation_error", "Idempotency-Key")
    assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["status"] == "draft"


def test_schedule_needs_a_future_send_at_within_a_year(tenant, template, members):
    campaign = make_campaign(tenant, template_id=template["id"], list_id=members["id"])
    now = dt.datetime.now(dt.UTC)
    path = f"/campaigns/{campaign['id']}/schedule"
    assert_error(tenant.post(path, json={"send_at": (now - dt.timedelta(minutes=1)).isoformat()}),
          400, "invalid_schedule", "send_at")
    assert_error(tenant.post(path, json={"send_at": (now + dt.timedelta(days=400)).isoformat()}),
          400, "invalid_schedule", "send_at")
    assert_error(tenant.post(path, json={"send_at": "tomorrow"}), 400, "validation_error", "send_at")
    assert_error(tenant.post(path, json={}), 400, "validation_error", "send_at")
    when = (now + dt.timedelta(days=2)).replace(microsecond=0)
    scheduled = tenant.post(path, json={"send_at": when.isoformat()}).json()["data"]
    assert scheduled["status"] == "scheduled"
    assert scheduled["scheduled_at"].startswith(when.strftime("%Y-%m-%dT%H:%M:%S"))


def test_cancel_applies_to_scheduled_campaigns_only_and_repeats_harmlessly(tenant, template, members):
    campaign = make_campaign(tenant, template_id=template["id"], list_id=members["id"])
    path = f"/campaigns/{campaign['id']}/cancel"
    assert_error(tenant.post(path), 409, "conflict")
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    tenant.post(f"/campaigns/{campaign['id']}/schedule", json={"send_at": later})
    cancelled = tenant.post(path)
    assert cancelled.status_code == 200 and cancelled.json()["data"]["status"] == "cancelled"
    assert tenant.post(path).json()["data"]["status"] == "cancelled"
    assert_error(send(tenant, campaign["id"]), 409, "conflict")
    assert_error(tenant.post(f"/campaigns/{campaign['id']}/schedule", json={"send_at": later}), 409, "conflict")


def test_pause_and_resume_refuse_a_campaign_that_is_not_sending_or_paused(tenant, template, members):
    campaign = make_campaign(tenant, template_id=template["id"], list_id=members["id"])
    path = f"/campaigns/{campaign['id']}"
    assert_error(tenant.post(f"{path}/pause"), 409, "conflict")  # a draft
    assert_error(tenant.post(f"{path}/resume"), 409, "conflict")
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    tenant.post(f"{path}/schedule", json={"send_at": later})
    assert_error(tenant.post(f"{path}/pause"), 409, "conflict")  # scheduled
    assert_error(tenant.post(f"{path}/resume"), 409, "conflict")
    tenant.post(f"{path}/cancel")
    assert_error(tenant.post(f"{path}/pause"), 409, "conflict")  # cancelled
    assert_error(tenant.post(f"{path}/resume"), 409, "conflict")
    assert tenant.get(path).json()["data"]["status"] == "cancelled"


def test_another_workspaces_campaign_answers_404_to_pause_and_resume(service, tenant, template, members):
    campaign = make_campaign(tenant, template_id=template["id"], list_id=members["id"])
    stranger = service.tenant()
    for action in ("pause", "resume"):
        assert_error(stranger.post(f"/campaigns/{campaign['id']}/{action}"), 404, "not_found")
    assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["status"] == "draft"


def test_paused_is_a_status_the_list_filters_by(tenant):
    assert tenant.get("/campaigns", params={"status": "paused"}).status_code == 200
