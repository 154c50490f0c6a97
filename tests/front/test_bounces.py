"""GET /bounces filters (type, email, since, until, pagination) and GET /bounces/:id."""

import uuid

from mongo import bounces as bounce_store
from pipelines.bounces.effects import bounce_document
from pipelines.bounces.parsing import Bounce
from tests.support.api import assert_error


def seed(service, tenant, email, type_, created_at, kind="bounce"):
    bounce = Bounce(email=email, type=type_, source="dsn", kind=kind,
                    smtp_status="5.1.1" if type_ == "permanent" else "4.2.2",
                    diagnostic_code="550 5.1.1 user unknown", action="failed", isp_name="gmail")
    doc = bounce_document(bounce, origin=uuid.uuid4().hex, workspace_id=tenant.workspace_id,
                          message_id="msg_" + uuid.uuid4().hex, created_at=created_at)
    service.store.run(bounce_store.insert, doc)
    return doc["_id"]


def ids(response):
    assert response.status_code == 200, response.text
    return [b["id"] for b in response.json()["data"]]


def test_filters_by_type_email_and_time(service, tenant):
    a = seed(service, tenant, "a@gmail.com", "permanent", "2026-01-10T08:00:00.000000Z")
    b = seed(service, tenant, "b@gmail.com", "transient", "2026-01-11T23:59:59.000000Z")
    c = seed(service, tenant, "A@gmail.com", "undetermined", "2026-01-12T00:00:00.000000Z")
    assert ids(tenant.get("/bounces")) == [c, b, a]
    assert ids(tenant.get("/bounces", params={"type": "transient"})) == [b]
    assert ids(tenant.get("/bounces", params={"email": "a@GMAIL.com"})) == [c, a]
    assert ids(tenant.get("/bounces", params={"since": "2026-01-11"})) == [c, b]
    assert ids(tenant.get("/bounces", params={"until": "2026-01-11"})) == [b, a]
    assert ids(tenant.get("/bounces", params={"since": "2026-01-11", "until": "2026-01-11"})) == [b]
    assert ids(tenant.get("/bounces", params={"since": "2026-01-10T09:00:00Z",
                                              "until": "2026-01-12T00:00:00+00:00"})) == [b]
    assert ids(tenant.get("/bounces", params={"since": "2026-01-11T01:00:00+02:00"})) == [c, b]
    paged = tenant.get("/bounces", params={"limit": 1, "offset": 1}).json()
    assert [x["id"] for x in paged["data"]] == [b]
    assert paged["pagination"] == {"total": 3, "limit": 1, "offset": 1, "has_more": True}


def test_detail_shows_status_diagnostic_and_isp(service, tenant):
    bounce_id = seed(service, tenant, "d@gmail.com", "permanent", "2026-01-10T08:00:00.000000Z")
    detail = tenant.get(f"/bounces/{bounce_id}").json()["data"]
    assert (detail["smtp_status"], detail["diagnostic_code"], detail["isp_name"], detail["type"]) == \
        ("5.1.1", "550 5.1.1 user unknown", "gmail", "permanent")
    assert detail["email"] == "d@gmail.com" and detail["message_id"].startswith("msg_")


def test_bad_filters_name_the_parameter(tenant):
    assert_error(tenant.get("/bounces", params={"type": "soft"}), 400, "validation_error", "type")
    assert_error(tenant.get("/bounces", params={"since": "yesterday"}), 400, "validation_error", "since")
    assert_error(tenant.get("/bounces", params={"until": "2026-13-01"}), 400, "validation_error", "until")
    assert_error(tenant.get("/bounces", params={"email": "nobody"}), 400, "validation_error", "email")
    assert_error(tenant.get("/bounces", params={"since": "2026-02-01", "until": "2026-01-01"}), 400,
          "validation_error", "until")
    assert_error(tenant.get("/bounces", params={"limit": 0}), 400, "validation_error", "limit")
    assert_error(tenant.get("/bounces", params={"offset": -1}), 400, "validation_error", "offset")


def test_unknown_and_foreign_bounces_answer_404(service, tenant):
    bounce_id = seed(service, tenant, "e@gmail.com", "permanent", "2026-01-10T08:00:00.000000Z")
    other = service.tenant()
    assert_error(other.get(f"/bounces/{bounce_id}"), 404, "not_found")
    assert_error(tenant.get(f"/bounces/{uuid.uuid4()}"), 404, "not_found")
    assert other.get("/bounces").json()["data"] == []
