"""The suppression list over real HTTP, and a suppressed address never being sent to."""

import pytest

from mongo import suppressions as suppression_store
from tests.support.api import assert_error
from tests.support.barriers import mail_barrier


def test_add_list_and_remove_an_address(tenant):
    created = tenant.post("/suppressions", json={"email": "Gone@Example.org"})
    assert created.status_code == 201, created.text
    entry = created.json()["data"]
    assert entry["email"] == "Gone@example.org" and entry["reason"] == "manual"
    assert entry["source"] == "api" and entry["created_at"].endswith("Z")
    listed = tenant.get("/suppressions").json()
    assert [e["email"] for e in listed["data"]] == ["Gone@example.org"]
    assert listed["pagination"] == {"total": 1, "limit": 100, "offset": 0, "has_more": False}
    removed = tenant.delete("/suppressions/gone@EXAMPLE.org")
    assert removed.status_code == 200 and removed.json()["data"]["deleted"] is True
    assert tenant.get("/suppressions").json()["data"] == []
    assert_error(tenant.delete("/suppressions/gone@example.org"), 404, "not_found")


def test_the_same_address_twice_in_any_case_is_a_duplicate(tenant):
    assert tenant.post("/suppressions", json={"email": "dup@example.org"}).status_code == 201
    assert_error(tenant.post("/suppressions", json={"email": "DUP@example.org", "reason": "complaint"}),
          409, "duplicate", "email")


def test_list_filters_by_reason_and_pages(tenant):
    for i in range(3):
        tenant.post("/suppressions", json={"email": f"u{i}@example.org", "reason": "unsubscribe"})
    tenant.post("/suppressions", json={"email": "h@example.org", "reason": "hard_bounce"})
    only = tenant.get("/suppressions", params={"reason": "unsubscribe", "limit": 2, "offset": 1}).json()
    assert len(only["data"]) == 2 and all(e["reason"] == "unsubscribe" for e in only["data"])
    assert only["pagination"] == {"total": 3, "limit": 2, "offset": 1, "has_more": False}
    assert_error(tenant.get("/suppressions", params={"reason": "bored"}), 400, "validation_error", "reason")
    assert_error(tenant.get("/suppressions", params={"limit": 1001}), 400, "validation_error", "limit")


def test_invalid_bodies_are_refused_with_the_field_named(tenant):
    assert_error(tenant.post("/suppressions", json={}), 400, "validation_error", "email")
    assert_error(tenant.post("/suppressions", json={"email": "not-an-address"}), 400, "validation_error", "email")
    assert_error(tenant.post("/suppressions", json={"email": 5}), 400, "validation_error", "email")
    assert_error(tenant.post("/suppressions", json={"email": "a" * 250 + "@x.org"}), 400, "validation_error", "email")
    assert_error(tenant.post("/suppressions", json={"email": "a@x.org", "reason": "other"}),
                 400, "validation_error", "reason")
    assert_error(tenant.post("/suppressions", json={"email": "a@x.org", "extra": 1}), 400, "validation_error", "extra")
    bad = tenant.post("/suppressions", content=b"{nope", headers={"Content-Type": "application/json"})
    assert_error(bad, 400, "validation_error")


def test_another_workspace_neither_sees_nor_removes_the_entry(service, tenant):
    tenant.post("/suppressions", json={"email": "private@example.org"})
    other = service.tenant()
    assert other.get("/suppressions").json()["data"] == []
    assert_error(other.delete("/suppressions/private@example.org"), 404, "not_found")
    assert len(tenant.get("/suppressions").json()["data"]) == 1


@pytest.mark.e2e
def test_a_fully_suppressed_send_is_stored_as_suppressed_and_never_sent(service, tenant):
    tenant.post("/suppressions", json={"email": "blocked@example.org"})
    response = tenant.post("/email/send", json={"to": "blocked@example.org", "subject": "Hi", "text": "x"})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["status"] == "suppressed" and data["suppressed_recipients"] == ["blocked@example.org"]
    status = tenant.get(f"/email/{data['message_id']}/status").json()["data"]
    assert status["status"] == "suppressed"
    assert status["suppressed_recipients"] == ["blocked@example.org"]
    mail_barrier(service)  # a job this send published is queued ahead of the sentinel's
    assert service.smtp.messages_to("blocked@example.org") == []


@pytest.mark.e2e
def test_suppressed_recipients_are_dropped_from_a_send_to_several(service, tenant):
    tenant.post("/suppressions", json={"email": "skip-me@example.org"})
    response = tenant.post("/email/send", json={"to": ["keep-me@example.org", "Skip-Me@example.org"],
                                                "subject": "Hi", "text": "x"})
    assert response.status_code == 202, response.text
    data = response.json()["data"]
    assert data["to"] == ["keep-me@example.org"] and data["suppressed_recipients"] == ["Skip-Me@example.org"]
    [received] = service.smtp.wait_for("keep-me@example.org")
    assert received.rcpt_tos == ["keep-me@example.org"]
    assert "Skip-Me" not in received.message["To"]


def test_suppressed_among_answers_for_the_addresses_as_given(service, tenant):
    tenant.post("/suppressions", json={"email": "x@example.org"})
    found = service.store.run(suppression_store.suppressed_among, tenant.workspace_id,
                              ["X@example.org", "y@example.org"])
    assert found == {"X@example.org"}
