"""Tags over real HTTP: CRUD with the spec's limits, contact_count, assignment, cascade."""

import uuid

import pytest

from tests.support.api import assert_error
from tests.support.audience import assert_unknown_everywhere, make_contact, make_list, make_tag
from tests.support.http_receiver import HttpReceiver, subscribe


def test_create_applies_the_default_colour_and_starts_with_no_contacts(tenant):
    tag = make_tag(tenant, "Customers")
    assert tag["color"] == "#6366f1" and tag["description"] is None and tag["contact_count"] == 0
    assert uuid.UUID(tag["id"])


def test_create_accepts_short_and_long_hex_colours_and_limits(tenant):
    assert make_tag(tenant, "A", color="#ABC")["color"] == "#abc"
    assert make_tag(tenant, "x" * 50, color="#12ab9F", description="d" * 200)["color"] == "#12ab9f"


@pytest.mark.parametrize("payload, path", [
    ({}, "name"),
    ({"name": ""}, "name"),
    ({"name": "x" * 51}, "name"),
    ({"name": 5}, "name"),
    ({"name": "T", "color": "red"}, "color"),
    ({"name": "T", "color": "#12345"}, "color"),
    ({"name": "T", "color": "#GGGGGG"}, "color"),
    ({"name": "T", "description": "d" * 201}, "description"),
    ({"name": "T", "weight": 1}, "weight"),
])
def test_create_refuses_invalid_fields_with_their_path(tenant, payload, path):
    assert_error(tenant.post("/tags", json=payload), 400, "validation_error", path)


def test_tag_names_are_unique_per_workspace_ignoring_case(service, tenant):
    make_tag(tenant, "Newsletter")
    assert_error(tenant.post("/tags", json={"name": "newsletter"}), 409, "duplicate")
    make_tag(service.tenant(), "Newsletter")


def test_patch_changes_given_fields_and_null_clears_the_description(tenant):
    tag = make_tag(tenant, "Old", description="about", color="#000")
    updated = tenant.patch(f"/tags/{tag['id']}", json={"name": "New"}).json()["data"]
    assert updated["name"] == "New" and updated["description"] == "about" and updated["color"] == "#000"
    updated = tenant.patch(f"/tags/{tag['id']}", json={"description": None, "color": "#FFF"}).json()["data"]
    assert updated["description"] is None and updated["color"] == "#fff"
    assert tenant.get(f"/tags/{tag['id']}").json()["data"] == updated


def test_patch_to_a_taken_name_is_a_duplicate_and_changes_nothing(tenant):
    make_tag(tenant, "Taken")
    tag = make_tag(tenant, "Mine")
    assert_error(tenant.patch(f"/tags/{tag['id']}", json={"name": "TAKEN"}), 409, "duplicate")
    assert tenant.get(f"/tags/{tag['id']}").json()["data"]["name"] == "Mine"
    assert tenant.patch(f"/tags/{tag['id']}", json={"name": "mine"}).status_code == 200


@pytest.mark.parametrize("payload, path", [
    ({"name": None}, "name"), ({"name": "x" * 51}, "name"), ({"color": "#12"}, "color"),
    ({"color": None}, "color"), ({"description": "d" * 201}, "description"), ({"contact_count": 3}, "contact_count"),
])
def test_patch_refuses_invalid_fields_with_their_path(tenant, payload, path):
    tag = make_tag(tenant, "T")
    assert_error(tenant.patch(f"/tags/{tag['id']}", json=payload), 400, "validation_error", path)


def test_unknown_or_foreign_tags_answer_404_everywhere(service, tenant):
    foreign = make_tag(service.tenant(), "Theirs")
    contact = make_contact(tenant, "a@example.org")
    for tag_id in (foreign["id"], str(uuid.uuid4())):
        assert_unknown_everywhere(tenant, f"/tags/{tag_id}", f"/tags/{tag_id}/contacts", contact["id"])
    assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["tags"] == []


def test_list_searches_names_and_pages(tenant):
    for name in ("Alpha", "alphabet", "Beta", "Gamma"):
        make_tag(tenant, name)
    found = tenant.get("/tags", params={"search": "ALPHA"}).json()
    assert [t["name"] for t in found["data"]] == ["Alpha", "alphabet"]
    assert found["pagination"]["total"] == 2
    paged = tenant.get("/tags", params={"limit": 2, "offset": 2}).json()
    assert [t["name"] for t in paged["data"]] == ["Beta", "Gamma"]
    assert paged["pagination"] == {"total": 4, "limit": 2, "offset": 2, "has_more": False}
    assert tenant.get("/tags", params={"search": ".*"}).json()["data"] == []


def test_assign_and_remove_report_what_changed_and_counts_follow(service, tenant):
    tag = make_tag(tenant, "VIP")
    people = [make_contact(tenant, f"t{i}@example.org")["id"] for i in range(4)]
    foreign = make_contact(service.tenant(), "tforeign@example.org")["id"]
    unknown = str(uuid.uuid4())

    response = tenant.post(f"/tags/{tag['id']}/contacts", json={"contact_ids": people[:3] + [foreign, unknown]})
    assert response.status_code == 200, response.text
    assert response.json()["data"] == {"tag_id": tag["id"], "assigned": 3, "already_assigned": 0,
                                       "not_found": [foreign, unknown]}
    again = tenant.post(f"/tags/{tag['id']}/contacts", json={"contact_ids": people[2:]}).json()["data"]
    assert again["assigned"] == 1 and again["already_assigned"] == 1
    assert tenant.get(f"/tags/{tag['id']}").json()["data"]["contact_count"] == 4
    assert [t["contact_count"] for t in tenant.get("/tags").json()["data"]] == [4]

    removed = tenant.delete(f"/tags/{tag['id']}/contacts", json={"contact_ids": [people[0], people[0], unknown]})
    assert removed.json()["data"] == {"tag_id": tag["id"], "removed": 1, "not_assigned": 0, "not_found": [unknown]}
    tenant.delete(f"/contacts/{people[1]}")
    tenant.post("/contacts/bulk-delete", json={"contact_ids": [people[2]]})
    assert tenant.get(f"/tags/{tag['id']}").json()["data"]["contact_count"] == 1
    listed = tenant.get(f"/tags/{tag['id']}/contacts").json()
    assert [c["id"] for c in listed["data"]] == [people[3]]
    assert listed["data"][0]["tags"] == [{"id": tag["id"], "name": tag["name"]}]
    assert tenant.get(f"/contacts/{people[0]}").json()["data"]["tags"] == []


@pytest.mark.parametrize("payload, path", [
    ({}, "contact_ids"), ({"contact_ids": []}, "contact_ids"),
    ({"contact_ids": [str(uuid.uuid4()) for _ in range(501)]}, "contact_ids"),
    ({"contact_ids": [None]}, "contact_ids[0]"), ({"contact_ids": [str(uuid.uuid4())], "x": 1}, "x"),
])
def test_assign_and_remove_refuse_bad_id_arrays(tenant, payload, path):
    tag = make_tag(tenant, "T")
    assert_error(tenant.post(f"/tags/{tag['id']}/contacts", json=payload), 400, "validation_error", path)
    assert_error(tenant.delete(f"/tags/{tag['id']}/contacts", json=payload), 400, "validation_error", path)


def test_assign_accepts_500_ids(tenant):
    tag = make_tag(tenant, "T")
    response = tenant.post(f"/tags/{tag['id']}/contacts", json={"contact_ids": [str(uuid.uuid4()) for _ in range(500)]})
    assert response.status_code == 200 and len(response.json()["data"]["not_found"]) == 500


def test_delete_removes_the_tag_from_every_contact(tenant):
    tag = make_tag(tenant, "Gone")
    keep = make_tag(tenant, "Kept")
    contact = make_contact(tenant, "c@example.org")
    for t in (tag, keep):
        tenant.post(f"/tags/{t['id']}/contacts", json={"contact_ids": [contact["id"]]})
    response = tenant.delete(f"/tags/{tag['id']}")
    assert response.status_code == 200 and response.json()["data"] == {"id": tag["id"], "deleted": True}
    assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["tags"] == [{"id": keep["id"], "name": keep["name"]}]
    assert_error(tenant.get(f"/tags/{tag['id']}"), 404, "not_found")
    make_tag(tenant, "Gone")  # the name is free again


@pytest.mark.e2e
def test_a_contact_shows_its_tags_as_id_and_name_like_its_lists_in_answers_and_webhooks(tenant):
    vip, news = make_tag(tenant, "VIP"), make_list(tenant, "News")
    contact = make_contact(tenant, "tagged-" + uuid.uuid4().hex[:8] + "@example.com", list_id=news["id"])
    tenant.post(f"/tags/{vip['id']}/contacts", json={"contact_ids": [contact["id"]]})
    named = [{"id": vip["id"], "name": "VIP"}]
    one = tenant.get(f"/contacts/{contact['id']}").json()["data"]
    assert one["tags"] == named and one["lists"] == [{"id": news["id"], "name": "News"}]
    listed = tenant.get("/contacts", params={"search": contact["email"]}).json()["data"]
    assert [c["tags"] for c in listed] == [named]
    assert [c["tags"] for c in tenant.get(f"/lists/{news['id']}/members").json()["data"]] == [named]

    receiver = HttpReceiver().start()
    try:
        subscribe(tenant, receiver, "contact.updated")
        changed = tenant.patch(f"/contacts/{contact['id']}", json={"first_name": "Vi"})
        assert changed.json()["data"]["tags"] == named
        [delivered] = receiver.wait_for(lambda r: r.accepted("contact.updated"), what="contact.updated")
    finally:
        receiver.stop()
    assert delivered.verified and delivered.json["data"]["contact"]["tags"] == named
