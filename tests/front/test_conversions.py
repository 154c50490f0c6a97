"""Conversions over real HTTP: recorded per contact, kept as `purchase` contact events,
conversion.created emitted, listed with pagination."""

import pytest

from tests.support.api import assert_error
from tests.support.audience import events, make_contact


def contact_events(service, tenant, contact_id, kind):
    async def read(db):
        return await db.contact_events.find({"workspace_id": tenant.workspace_id, "contact_id": contact_id,
                                             "type": kind}).to_list()
    return service.store.run(read)


def test_a_conversion_is_recorded_as_a_purchase_and_emits_conversion_created(service, tenant):
    contact = make_contact(tenant, "buyer@example.org")
    response = tenant.post("/conversions", json={"contact_id": contact["id"], "value": 49.9,
                                                 "currency": "EUR", "metadata": {"order": "A-17"}})
    assert response.status_code == 201, response.text
    conversion = response.json()["data"]
    assert conversion["value"] == "49.9"
    assert conversion["currency"] == "EUR"
    assert conversion["metadata"] == {"order": "A-17"}
    assert conversion["contact_id"] == contact["id"]
    [purchase] = contact_events(service, tenant, contact["id"], "purchase")
    assert purchase["data"]["conversion_id"] == conversion["id"]
    [event] = events(service, tenant, "conversion.created")
    assert event["data"]["conversion"] == conversion
    shape = {"id", "contact_id", "contact_email", "value", "currency", "metadata", "created_at"}
    assert set(conversion) == shape  # nothing stored internally leaks into the answer
    [listed] = tenant.get("/conversions").json()["data"]
    assert listed == conversion


def test_value_may_be_a_numeric_string_and_currency_defaults_to_usd(tenant):
    contact = make_contact(tenant, "b2@example.org")
    response = tenant.post("/conversions", json={"contact_id": contact["id"], "value": "0.10"})
    assert response.status_code == 201, response.text
    assert response.json()["data"]["value"] == "0.10"
    assert response.json()["data"]["currency"] == "USD"
    assert response.json()["data"]["metadata"] == {}


@pytest.mark.parametrize("field,value,path", [
    ("value", -1, "value"), ("value", "abc", "value"), ("value", True, "value"),
    ("value", 1.23456, "value"), ("value", "NaN", "value"),
    ("currency", "usd", "currency"), ("currency", "EURO", "currency"), ("currency", 840, "currency"),
    ("metadata", "x", "metadata"), ("metadata", {"blob": "x" * 17000}, "metadata"),
    ("contact_id", 5, "contact_id"), ("extra", 1, "extra"),
])
def test_bad_fields_are_refused_with_their_path(tenant, field, value, path):
    contact = make_contact(tenant, f"bad-{field}@example.org")
    body = {"contact_id": contact["id"], "value": 10, field: value}
    assert_error(tenant.post("/conversions", json=body), 400, "validation_error", path)


@pytest.mark.parametrize("missing", ["contact_id", "value"])
def test_required_fields_are_required(tenant, missing):
    body = {"contact_id": "x", "value": 1}
    del body[missing]
    assert_error(tenant.post("/conversions", json=body), 400, "validation_error", missing)


def test_unknown_or_foreign_contact_answers_404_contact_not_found(service, tenant):
    assert_error(tenant.post("/conversions", json={"contact_id": "nope", "value": 1}), 404, "contact_not_found")
    other = service.tenant()
    theirs = make_contact(other, "theirs@example.org")
    assert_error(tenant.post("/conversions", json={"contact_id": theirs["id"], "value": 1}), 404, "contact_not_found")


def test_malformed_json_is_a_validation_error(tenant):
    response = tenant.post("/conversions", content=b"{nope", headers={"Content-Type": "application/json"})
    assert_error(response, 400, "validation_error")


def test_conversions_are_listed_newest_first_with_pagination_and_only_for_the_workspace(service, tenant):
    contact = make_contact(tenant, "lister@example.org")
    for value in (1, 2, 3):
        assert tenant.post("/conversions", json={"contact_id": contact["id"], "value": value}).status_code == 201
    other = service.tenant()
    theirs = make_contact(other, "o@example.org")
    assert other.post("/conversions", json={"contact_id": theirs["id"], "value": 9}).status_code == 201
    body = tenant.get("/conversions", params={"limit": 2}).json()
    assert body["pagination"] == {"total": 3, "limit": 2, "offset": 0, "has_more": True}
    assert [c["value"] for c in body["data"]] == ["3", "2"]
    rest = tenant.get("/conversions", params={"limit": 2, "offset": 2}).json()
    assert [c["value"] for c in rest["data"]] == ["1"]
    assert_error(tenant.get("/conversions", params={"limit": 0}), 400, "validation_error", "limit")
