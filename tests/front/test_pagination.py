"""`limit`/`offset` and the `{data, pagination}` shape, on real list endpoints."""

import pytest

from tests.support.api import assert_error


@pytest.fixture
def five_tags(tenant):
    names = [f"tag-{c}" for c in "abcde"]
    for name in names:
        response = tenant.post("/tags", json={"name": name})
        assert response.status_code == 201, response.text
    return names


def test_defaults_are_limit_100_offset_0(tenant, five_tags):
    body = tenant.get("/tags").json()
    assert set(body) == {"data", "pagination"}
    assert body["pagination"] == {"total": 5, "limit": 100, "offset": 0, "has_more": False}
    assert sorted(t["name"] for t in body["data"]) == five_tags


def test_pages_walk_every_item_once_and_has_more_says_when_to_stop(tenant, five_tags):
    seen, offset, pages = [], 0, []
    while True:
        body = tenant.get("/tags", params={"limit": 2, "offset": offset}).json()
        pages.append(body["pagination"])
        seen += [t["name"] for t in body["data"]]
        if not body["pagination"]["has_more"]:
            break
        offset += 2
    assert sorted(seen) == five_tags and len(seen) == 5
    assert [p["has_more"] for p in pages] == [True, True, False]
    assert {p["total"] for p in pages} == {5}
    assert [p["offset"] for p in pages] == [0, 2, 4]
    assert {p["limit"] for p in pages} == {2}


def test_offset_past_the_end_answers_an_empty_page(tenant, five_tags):
    body = tenant.get("/tags", params={"offset": 10}).json()
    assert body == {"data": [], "pagination": {"total": 5, "limit": 100, "offset": 10, "has_more": False}}


def test_limit_of_exactly_the_total_has_no_more(tenant, five_tags):
    body = tenant.get("/tags", params={"limit": 5}).json()
    assert len(body["data"]) == 5
    assert body["pagination"]["has_more"] is False


def test_largest_limit_1000_and_largest_offset_are_accepted(tenant):
    body = tenant.get("/tags", params={"limit": 1000}).json()
    assert body["pagination"]["limit"] == 1000
    far = tenant.get("/tags", params={"offset": 2**31 - 1})
    assert far.status_code == 200
    assert far.json()["data"] == []


@pytest.mark.parametrize("params, path", [
    ({"limit": 0}, "limit"),
    ({"limit": 1001}, "limit"),
    ({"limit": -1}, "limit"),
    ({"limit": "abc"}, "limit"),
    ({"limit": "1.5"}, "limit"),
    ({"limit": ""}, "limit"),
    ({"offset": -1}, "offset"),
    ({"offset": "abc"}, "offset"),
    ({"limit": 10, "offset": "1e3"}, "offset"),
    ({"offset": 2**31}, "offset"),
    ({"offset": 10**20}, "offset"),
])
def test_invalid_limit_or_offset_answers_400_with_its_path(tenant, params, path):
    response = tenant.get("/tags", params=params)
    assert_error(response, 400, "validation_error", path)


@pytest.mark.e2e
def test_every_list_endpoint_validates_and_answers_the_list_shape(service, tenant):
    """Every GET without path parameters that the OpenAPI says takes `limit`."""
    import httpx
    document = httpx.get(service.base_url + "/openapi.json", timeout=30).json()
    lists = [path for path, ops in document["paths"].items()
             if "get" in ops and "{" not in path
             and any(p["name"] == "limit" for p in ops["get"].get("parameters", []))]
    assert {"/api/v1/contacts", "/api/v1/tags"} <= set(lists)
    for path in lists:
        relative = path.removeprefix("/api/v1")
        ok = tenant.get(relative)
        assert ok.status_code == 200, (path, ok.text)
        # GET /email adds its cursor and whether the total is exact (docs/email.md)
        extra = {"next_cursor": None, "total_exact": True} if relative == "/email" else {}
        if relative == "/inbound/messages":  # a cursor too (docs/inbound.md)
            extra = {"next_cursor": None}
        assert ok.json()["pagination"] == {"total": ok.json()["pagination"]["total"], "limit": 100,
                                           "offset": 0, "has_more": False, **extra}, path
        for params, field in (({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"offset": -1}, "offset")):
            bad = tenant.get(relative, params=params)
            assert bad.status_code == 400, (path, params, bad.text)
            assert bad.json()["error"]["path"] == field, (path, params)
