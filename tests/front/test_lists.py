"""Lists over real HTTP: static and dynamic lists, members, counts, events, cascade."""

import uuid

import pytest

from tests.support.api import assert_error
from tests.support.audience import assert_unknown_everywhere, events, make_contact, make_list

VIP_RULES = {"match": "all", "rules": [{"field": "vip", "operator": "equals", "value": True}]}


def test_create_static_list_by_default_with_no_members(tenant):
    lst = make_list(tenant, "Weekly", description="The weekly letter")
    assert lst["type"] == "static" and lst["conditions"] is None and lst["member_count"] == 0
    assert lst["description"] == "The weekly letter" and uuid.UUID(lst["id"])


@pytest.mark.parametrize("payload, path", [
    ({}, "name"), ({"name": ""}, "name"), ({"name": "x" * 201}, "name"),
    ({"name": "L", "type": "smart"}, "type"),
    ({"name": "L", "type": "dynamic"}, "conditions"),
    ({"name": "L", "type": "static", "conditions": VIP_RULES}, "conditions"),
    ({"name": "L", "type": "dynamic", "conditions": {"match": "all", "rules": []}}, "conditions.rules"),
    ({"name": "L", "type": "dynamic", "conditions": {"match": "all", "rules": [
        {"field": "age", "operator": "gt", "value": 3}, {"field": "age", "operator": "near", "value": 1}]}},
     "conditions.rules[1].operator"),
    ({"name": "L", "colour": "red"}, "colour"),
])
def test_create_refuses_invalid_lists_with_their_path(tenant, payload, path):
    assert_error(tenant.post("/lists", json=payload), 400, "validation_error", path)


def test_rules_naming_an_unknown_tag_answer_404_with_its_path(tenant):
    assert_error(tenant.post("/lists", json={"name": "L", "type": "dynamic", "conditions": {"rules": [
        {"field": "tags", "operator": "equals", "value": "no-such-tag"}]}}),
        404, "not_found", "conditions.rules[0].value")


def test_rules_may_name_static_lists_but_not_dynamic_ones(tenant):
    static = make_list(tenant, "S")
    dynamic = make_list(tenant, "D", type="dynamic", conditions=VIP_RULES)
    make_list(tenant, "In S", type="dynamic",
              conditions={"rules": [{"field": "lists", "operator": "equals", "value": static["id"]}]})
    assert_error(tenant.post("/lists", json={"name": "In D", "type": "dynamic", "conditions": {
        "rules": [{"field": "lists", "operator": "in", "value": [static["id"], dynamic["id"]]}]}}),
        400, "validation_error", "conditions.rules[0].value[1]")


def test_static_members_are_added_and_removed_with_outcomes_and_events(service, tenant):
    lst = make_list(tenant, "Static")
    people = [make_contact(tenant, f"s{i}@example.org") for i in range(3)]
    foreign = make_contact(service.tenant(), "sforeign@example.org")["id"]
    response = tenant.post(f"/lists/{lst['id']}/members",
                           json={"contact_ids": [p["id"] for p in people] + [foreign]})
    assert response.status_code == 200, response.text
    assert response.json()["data"] == {"list_id": lst["id"], "added": 3, "already_members": 0,
                                       "not_found": [foreign]}
    again = tenant.post(f"/lists/{lst['id']}/members", json={"contact_ids": [people[0]["id"]]}).json()["data"]
    assert again["added"] == 0 and again["already_members"] == 1
    assert tenant.get(f"/lists/{lst['id']}").json()["data"]["member_count"] == 3

    removed = tenant.delete(f"/lists/{lst['id']}/members", json={"contact_ids": [people[0]["id"], foreign]})
    assert removed.json()["data"] == {"list_id": lst["id"], "removed": 1, "not_members": 0,
                                      "not_found": [foreign]}
    members = tenant.get(f"/lists/{lst['id']}/members").json()
    assert {c["id"] for c in members["data"]} == {people[1]["id"], people[2]["id"]}
    assert members["pagination"]["total"] == 2

    added = events(service, tenant, "list.member_added")
    assert sorted(e["data"]["contact"]["email"] for e in added) == [p["email"] for p in people]
    assert all(e["data"]["list"] == {"id": lst["id"], "name": "Static"} for e in added)
    [gone] = events(service, tenant, "list.member_removed")
    assert gone["data"]["contact"] == {"id": people[0]["id"], "email": "s0@example.org"}


def test_joining_and_leaving_a_static_list_emit_contact_subscribed_and_unsubscribed_with_the_list(
        service, tenant):
    lst = make_list(tenant, "Weekly")
    first = make_contact(tenant, "joins@example.org", first_name="Jo", list_id=lst["id"])
    second = make_contact(tenant, "added@example.org")
    tenant.post(f"/lists/{lst['id']}/members", json={"contact_ids": [first["id"], second["id"]]})
    tenant.delete(f"/lists/{lst['id']}/members", json={"contact_ids": [second["id"]]})
    tenant.delete(f"/lists/{lst['id']}/members", json={"contact_ids": [second["id"]]})  # not a member: silent

    subscribed = events(service, tenant, "contact.subscribed")
    assert [e["data"]["contact"]["id"] for e in subscribed] == [first["id"], second["id"]]
    assert all(e["data"]["list"] == {"id": lst["id"], "name": "Weekly"} and e["data"]["reason"] == "api"
               for e in subscribed)
    assert subscribed[0]["data"]["contact"]["first_name"] == "Jo"
    [left] = events(service, tenant, "contact.unsubscribed")
    assert left["data"]["contact"]["email"] == "added@example.org"
    assert left["data"]["list"] == {"id": lst["id"], "name": "Weekly"}
    # the contact's own subscription flag is untouched by lists, and its events carry no list
    assert tenant.get(f"/contacts/{second['id']}").json()["data"]["subscribed"] is True
    tenant.patch(f"/contacts/{second['id']}", json={"subscribed": False})
    flag = events(service, tenant, "contact.unsubscribed")[-1]
    assert flag["data"]["list"] is None and flag["data"]["reason"] == "api"


def test_member_counts_follow_contact_deletion(tenant):
    lst = make_list(tenant, "Counted")
    people = [make_contact(tenant, f"m{i}@example.org", list_id=lst["id"])["id"] for i in range(3)]
    tenant.delete(f"/contacts/{people[0]}")
    assert tenant.get(f"/lists/{lst['id']}").json()["data"]["member_count"] == 2
    assert [entry["member_count"] for entry in tenant.get("/lists").json()["data"]] == [2]


def test_dynamic_list_members_are_the_contacts_matching_its_conditions(tenant):
    vip = make_list(tenant, "VIPs", type="dynamic", conditions=VIP_RULES)
    yes = make_contact(tenant, "yes@example.org", attributes={"vip": True})
    make_contact(tenant, "no@example.org", attributes={"vip": False})
    make_contact(tenant, "none@example.org")
    assert vip["member_count"] == 0  # counted when it was created
    assert tenant.get(f"/lists/{vip['id']}").json()["data"]["member_count"] == 1
    members = tenant.get(f"/lists/{vip['id']}/members").json()["data"]
    assert [m["id"] for m in members] == [yes["id"]]
    assert tenant.get(f"/contacts/{yes['id']}").json()["data"]["lists"] == [{"id": vip["id"], "name": "VIPs"}]
    late = make_contact(tenant, "late@example.org")
    tenant.patch(f"/contacts/{late['id']}", json={"attributes": {"vip": True}})
    assert tenant.get(f"/lists/{vip['id']}").json()["data"]["member_count"] == 2


def test_dynamic_list_members_cannot_be_added_or_removed_by_id(tenant):
    vip = make_list(tenant, "VIPs", type="dynamic", conditions=VIP_RULES)
    contact = make_contact(tenant, "d@example.org")
    for call in (tenant.post, tenant.delete):
        body = assert_error(call(f"/lists/{vip['id']}/members", json={"contact_ids": [contact["id"]]}), 409,
                            "conflict")
        assert "dynamic" in body["message"]


def test_patch_updates_name_description_and_dynamic_conditions(tenant):
    lst = make_list(tenant, "Dyn", type="dynamic", conditions=VIP_RULES, description="old")
    make_contact(tenant, "pro@example.org", attributes={"plan": "pro"})
    new_rules = {"match": "any", "rules": [{"field": "plan", "operator": "equals", "value": "pro"}]}
    updated = tenant.patch(f"/lists/{lst['id']}", json={"name": "Pro", "description": None,
                                                         "conditions": new_rules}).json()["data"]
    assert updated["name"] == "Pro" and updated["description"] is None
    assert updated["conditions"] == new_rules and updated["member_count"] == 1
    assert updated["type"] == "dynamic"


@pytest.mark.parametrize("payload, path", [
    ({"name": None}, "name"), ({"name": ""}, "name"), ({"type": "dynamic"}, "type"),
    ({"conditions": VIP_RULES}, "conditions"),
])
def test_patch_refuses_invalid_changes_with_their_path(tenant, payload, path):
    lst = make_list(tenant, "Static")
    assert_error(tenant.patch(f"/lists/{lst['id']}", json=payload), 400, "validation_error", path)


def test_patch_of_dynamic_conditions_is_validated(tenant):
    lst = make_list(tenant, "Dyn", type="dynamic", conditions=VIP_RULES)
    bad = {"match": "all", "rules": [{"field": "created_at", "operator": "gt", "value": "soon"}]}
    assert_error(tenant.patch(f"/lists/{lst['id']}", json={"conditions": bad}), 400, "validation_error",
          "conditions.rules[0].value")


def test_list_filters_by_type_and_pages(tenant):
    make_list(tenant, "S1")
    make_list(tenant, "D1", type="dynamic", conditions=VIP_RULES)
    make_list(tenant, "S2")
    statics = tenant.get("/lists", params={"type": "static"}).json()
    assert sorted(x["name"] for x in statics["data"]) == ["S1", "S2"]
    assert [x["name"] for x in tenant.get("/lists", params={"type": "dynamic"}).json()["data"]] == ["D1"]
    paged = tenant.get("/lists", params={"limit": 1, "offset": 1}).json()
    assert paged["pagination"] == {"total": 3, "limit": 1, "offset": 1, "has_more": True}
    assert_error(tenant.get("/lists", params={"type": "smart"}), 400, "validation_error", "type")


def test_delete_keeps_the_member_contacts(tenant):
    lst = make_list(tenant, "Doomed")
    other = make_list(tenant, "Other")
    contact = make_contact(tenant, "keep@example.org", list_id=lst["id"])
    tenant.post(f"/lists/{other['id']}/members", json={"contact_ids": [contact["id"]]})
    response = tenant.delete(f"/lists/{lst['id']}")
    assert response.status_code == 200 and response.json()["data"] == {"id": lst["id"], "deleted": True}
    kept = tenant.get(f"/contacts/{contact['id']}").json()["data"]
    assert kept["lists"] == [{"id": other["id"], "name": "Other"}]
    assert_error(tenant.get(f"/lists/{lst['id']}"), 404, "not_found")


def test_unknown_or_foreign_lists_answer_404_everywhere(service, tenant):
    foreign = make_list(service.tenant(), "Theirs")
    contact = make_contact(tenant, "a@example.org")
    for list_id in (foreign["id"], str(uuid.uuid4())):
        assert_unknown_everywhere(tenant, f"/lists/{list_id}", f"/lists/{list_id}/members", contact["id"])


@pytest.mark.parametrize("payload, path", [
    ({}, "contact_ids"), ({"contact_ids": []}, "contact_ids"),
    ({"contact_ids": [str(uuid.uuid4()) for _ in range(5001)]}, "contact_ids"),
    ({"contact_ids": [1]}, "contact_ids[0]"),
])
def test_member_changes_refuse_bad_id_arrays(tenant, payload, path):
    lst = make_list(tenant, "L")
    assert_error(tenant.post(f"/lists/{lst['id']}/members", json=payload), 400, "validation_error", path)
    assert_error(tenant.delete(f"/lists/{lst['id']}/members", json=payload), 400, "validation_error", path)
