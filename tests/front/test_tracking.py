"""Product views over real HTTP: kept per contact as `page_viewed` contact events."""

import pytest

from tests.support.api import assert_error
from tests.support.audience import make_contact


def page_views(service, tenant, contact_id):
    async def read(db):
        return await db.contact_events.find({"workspace_id": tenant.workspace_id, "contact_id": contact_id,
                                             "type": "page_viewed"}).to_list()
    return service.store.run(read)


def test_a_product_view_is_kept_as_a_page_viewed_event_of_the_contact(service, tenant):
    contact = make_contact(tenant, "Viewer@Example.org")
    response = tenant.post("/track/product-view", json={
        "contact_email": "viewer@example.org", "product_id": "sku-1", "name": "Blue mug",
        "price": "12.50", "currency": "EUR", "url": "https://shop.example/mug", "category": "kitchen",
        "image_url": "https://cdn.example/mug.png", "metadata": {"size": "L"}})
    assert response.status_code == 201, response.text
    view = response.json()["data"]
    assert view["contact_id"] == contact["id"]
    assert view["price"] == "12.50" and view["currency"] == "EUR"
    assert view["event"] == "page_viewed"
    [stored] = page_views(service, tenant, contact["id"])
    assert stored["data"]["product_id"] == "sku-1"
    assert stored["data"]["metadata"] == {"size": "L"}


def test_only_contact_email_and_product_id_are_required_and_a_bare_price_is_in_usd(tenant):
    make_contact(tenant, "bare@example.org")
    response = tenant.post("/track/product-view", json={"contact_email": "bare@example.org",
                                                        "product_id": "p", "price": 3})
    assert response.status_code == 201, response.text
    assert response.json()["data"]["currency"] == "USD"
    assert response.json()["data"]["price"] == "3"


@pytest.mark.parametrize("missing", ["contact_email", "product_id"])
def test_required_fields_are_required(tenant, missing):
    body = {"contact_email": "a@example.org", "product_id": "p"}
    del body[missing]
    assert_error(tenant.post("/track/product-view", json=body), 400, "validation_error", missing)


@pytest.mark.parametrize("field,value", [
    ("contact_email", "not-an-email"), ("product_id", ""), ("product_id", "x" * 201),
    ("price", -3), ("price", "cheap"), ("currency", "eur"), ("url", "javascript:alert(1)"),
    ("image_url", "ftp://x.example/a.png"), ("metadata", [1]), ("name", 7),
    ("id", "mine"), ("viewed_at", "now"), ("bad name", 1), ("$where", 1), ("deep", {"a": {"b": {"c": [1]}}}),
    ("big", "x" * (16 * 1024)), ("huge", 2**70),
])
def test_bad_fields_are_refused_with_their_path(tenant, field, value):
    body = {"contact_email": "a@example.org", "product_id": "p", field: value}
    assert_error(tenant.post("/track/product-view", json=body), 400, "validation_error", field)


def test_unknown_email_or_another_workspaces_contact_answers_404_contact_not_found(service, tenant):
    body = {"contact_email": "nobody@example.org", "product_id": "p"}
    assert_error(tenant.post("/track/product-view", json=body), 404, "contact_not_found", "contact_email")
    other = service.tenant()
    make_contact(other, "elsewhere@example.org")
    body = {"contact_email": "elsewhere@example.org", "product_id": "p"}
    assert_error(tenant.post("/track/product-view", json=body), 404, "contact_not_found")


def test_any_other_product_field_is_kept_and_read_back(service, tenant):
    contact = make_contact(tenant, "colours@example.org")
    extra = {"colour": "red", "sizes": ["S", "M"], "stock": 12, "on_sale": True,
             "dimensions": {"cm": {"w": 10, "h": [20, 21]}}, "brand-name": None}
    response = tenant.post("/track/product-view", json={"contact_email": "colours@example.org",
                                                        "product_id": "sku-9", **extra})
    assert response.status_code == 201, response.text
    view = response.json()["data"]
    assert {k: view[k] for k in extra} == extra
    assert view["product_id"] == "sku-9" and view["id"] and view["event"] == "page_viewed"
    [stored] = page_views(service, tenant, contact["id"])
    assert {k: stored["data"][k] for k in extra} == extra


def test_product_fields_are_bounded_in_number(tenant):
    make_contact(tenant, "many@example.org")
    body = {"contact_email": "many@example.org", "product_id": "p", **{f"f{i}": i for i in range(50)}}
    assert tenant.post("/track/product-view", json=body).status_code == 201
    body["f50"] = 50
    assert_error(tenant.post("/track/product-view", json=body), 400, "validation_error")
