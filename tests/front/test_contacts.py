"""Contacts over real HTTP: create, read, merge-update, delete, bulk delete, search and
filters, duplicates across lists, and the events they record."""

import uuid

import pytest

from mongo import contacts as contact_store
from tests.support.api import assert_error
from tests.support.audience import events, make_contact, make_list


def test_create_normalises_the_email_and_applies_defaults(tenant):
    contact = make_contact(tenant, "Ann.Smith@EXAMPLE.Org", first_name="Ann")
    assert contact["email"] == "Ann.Smith@example.org"
    assert uuid.UUID(contact["id"])
    assert contact["subscribed"] is True and contact["bounced"] is False
    assert contact["attributes"] == {} and contact["tags"] == [] and contact["lists"] == []
    assert contact["last_name"] is None and contact["created_at"].endswith("Z")


def test_create_with_list_id_joins_the_list_and_get_shows_its_lists(service, tenant):
    newsletter = make_list(tenant, "Newsletter")
    contact = make_contact(tenant, "bob@example.org", list_id=newsletter["id"], subscribed=False)
    assert contact["lists"] == [{"id": newsletter["id"], "name": "Newsletter"}]
    fetched = tenant.get(f"/contacts/{contact['id']}").json()["data"]
    assert fetched["lists"] == [{"id": newsletter["id"], "name": "Newsletter"}]
    assert fetched["subscribed"] is False and fetched["unsubscribed_at"]
    [created] = events(service, tenant, "contact.created")
    assert created["data"]["contact"]["email"] == "bob@example.org"
    [added] = events(service, tenant, "list.member_added")
    assert added["data"] == {"list": {"id": newsletter["id"], "name": "Newsletter"},
                             "contact": {"id": contact["id"], "email": "bob@example.org"}}


def test_a_second_contact_with_the_same_address_in_any_case_is_a_duplicate(tenant):
    make_contact(tenant, "carol@example.org")
    assert_error(tenant.post("/contacts", json={"email": "CAROL@Example.org"}), 409, "duplicate")


def test_the_same_address_may_exist_in_two_workspaces(service, tenant):
    make_contact(tenant, "shared@example.org")
    make_contact(service.tenant(), "shared@example.org")


@pytest.mark.parametrize("payload, path", [
    ({}, "email"),
    ({"email": "not-an-address"}, "email"),
    ({"email": 42}, "email"),
    ({"email": "a@example.org", "first_name": "x" * 101}, "first_name"),
    ({"email": "a@example.org", "last_name": "x" * 101}, "last_name"),
    ({"email": "a@example.org", "attributes": ["x"]}, "attributes"),
    ({"email": "a@example.org", "attributes": {"bad key!": 1}}, "attributes.bad key!"),
    ({"email": "a@example.org", "subscribed": "true"}, "subscribed"),
    ({"email": "a@example.org", "nickname": "al"}, "nickname"),
])
def test_create_refuses_invalid_fields_with_their_path(tenant, payload, path):
    assert_error(tenant.post("/contacts", json=payload), 400, "validation_error", path)


def test_create_accepts_names_of_exactly_100_characters(tenant):
    contact = make_contact(tenant, "long@example.org", first_name="x" * 100, last_name="y" * 100)
    assert len(contact["first_name"]) == 100


def test_create_refuses_malformed_json_and_a_non_object_body(tenant):
    response = tenant.client.post("/contacts", content=b"{not json", headers={"Content-Type": "application/json"})
    assert_error(response, 400, "validation_error")
    assert_error(tenant.post("/contacts", json=["a@example.org"]), 400, "validation_error")


def test_create_with_an_unknown_or_foreign_list_is_not_found_and_creates_nothing(service, tenant):
    foreign = make_list(service.tenant(), "Theirs")
    for list_id in (str(uuid.uuid4()), foreign["id"]):
        assert_error(tenant.post("/contacts", json={"email": "d@example.org", "list_id": list_id}), 404, "not_found")
    assert tenant.get("/contacts").json()["pagination"]["total"] == 0


def test_create_into_a_dynamic_list_is_refused(tenant):
    dynamic = make_list(tenant, "VIPs", type="dynamic",
                        conditions={"match": "all", "rules": [{"field": "vip", "operator": "equals", "value": True}]})
    assert_error(tenant.post("/contacts", json={"email": "e@example.org", "list_id": dynamic["id"]}),
          400, "validation_error", "list_id")


def test_get_patch_delete_of_unknown_or_foreign_contacts_answer_404(service, tenant):
    foreign = make_contact(service.tenant(), "foreign@example.org")
    for contact_id in (str(uuid.uuid4()), foreign["id"]):
        assert_error(tenant.get(f"/contacts/{contact_id}"), 404, "not_found")
        assert_error(tenant.patch(f"/contacts/{contact_id}", json={"first_name": "X"}), 404, "not_found")
        assert_error(tenant.delete(f"/contacts/{contact_id}"), 404, "not_found")
    assert service.store.run(contact_store.get, foreign_ws(service, foreign), foreign["id"]) is not None


def foreign_ws(service, contact):
    async def find(db):
        return (await db.contacts.find_one({"_id": contact["id"]}))["workspace_id"]
    return service.store.run(find)


def test_patch_merges_attributes_and_changes_only_given_fields(tenant):
    contact = make_contact(tenant, "f@example.org", first_name="Fay", last_name="Lee",
                           attributes={"plan": "free", "age": 30, "city": "Oslo"})
    response = tenant.patch(f"/contacts/{contact['id']}", json={"attributes": {"plan": "pro", "score": 9}})
    assert response.status_code == 200, response.text
    updated = response.json()["data"]
    assert updated["attributes"] == {"plan": "pro", "age": 30, "city": "Oslo", "score": 9}
    assert updated["first_name"] == "Fay" and updated["last_name"] == "Lee"

    updated = tenant.patch(f"/contacts/{contact['id']}", json={"attributes": {"city": None}}).json()["data"]
    assert updated["attributes"] == {"plan": "pro", "age": 30, "score": 9}
    assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["attributes"] == updated["attributes"]


def test_patch_null_clears_names_and_email_change_is_normalised(tenant):
    contact = make_contact(tenant, "g@example.org", first_name="Gus", last_name="Hale")
    updated = tenant.patch(f"/contacts/{contact['id']}",
                           json={"first_name": None, "email": "Gus@NEW.example"}).json()["data"]
    assert updated["first_name"] is None and updated["last_name"] == "Hale"
    assert updated["email"] == "Gus@new.example"
    make_contact(tenant, "g@example.org")  # the old address is free again


def test_patch_to_an_address_taken_by_another_contact_is_a_duplicate(tenant):
    make_contact(tenant, "taken@example.org")
    contact = make_contact(tenant, "h@example.org")
    assert_error(tenant.patch(f"/contacts/{contact['id']}", json={"email": "Taken@example.org"}), 409, "duplicate")
    assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["email"] == "h@example.org"


@pytest.mark.parametrize("payload, path", [
    ({"email": None}, "email"),
    ({"email": "nope"}, "email"),
    ({"attributes": None}, "attributes"),
    ({"attributes": {"a.b": 1}}, "attributes.a.b"),
    ({"subscribed": None}, "subscribed"),
    ({"first_name": "x" * 101}, "first_name"),
    ({"tags": []}, "tags"),
])
def test_patch_refuses_invalid_fields_with_their_path(tenant, payload, path):
    contact = make_contact(tenant, "i@example.org")
    assert_error(tenant.patch(f"/contacts/{contact['id']}", json=payload), 400, "validation_error", path)


def test_unsubscribing_and_resubscribing_record_events(service, tenant):
    contact = make_contact(tenant, "j@example.org")
    updated = tenant.patch(f"/contacts/{contact['id']}", json={"subscribed": False}).json()["data"]
    assert updated["subscribed"] is False and updated["unsubscribed_at"]
    tenant.patch(f"/contacts/{contact['id']}", json={"subscribed": False})  # no change, no event
    updated = tenant.patch(f"/contacts/{contact['id']}", json={"subscribed": True}).json()["data"]
    assert updated["subscribed"] is True and updated["unsubscribed_at"] is None
    [gone] = events(service, tenant, "contact.unsubscribed")
    [back] = events(service, tenant, "contact.subscribed")
    assert gone["data"]["contact"]["id"] == contact["id"] and gone["data"]["reason"] == "api"
    assert back["data"]["contact"]["subscribed"] is True
    changed = [e["data"]["changed"] for e in events(service, tenant, "contact.updated")]
    assert changed == [["subscribed"]] * 2  # the repeat changed nothing and said nothing


def test_a_patch_that_repeats_what_is_stored_changes_nothing_and_emits_nothing(service, tenant):
    contact = make_contact(tenant, "same@example.org", first_name="Ann", attributes={"plan": "pro"})
    before = tenant.get(f"/contacts/{contact['id']}").json()["data"]
    again = tenant.patch(f"/contacts/{contact['id']}", json={"first_name": "Ann", "attributes": {"plan": "pro"},
                                                             "subscribed": True})
    assert again.status_code == 200 and again.json()["data"] == before
    assert events(service, tenant, "contact.updated") == []
    tenant.patch(f"/contacts/{contact['id']}", json={"first_name": "Ann", "last_name": "Lee"})
    [updated] = events(service, tenant, "contact.updated")
    assert updated["data"]["changed"] == ["last_name"]  # first_name was already Ann


def test_patch_records_contact_updated_with_the_changed_fields(service, tenant):
    contact = make_contact(tenant, "k@example.org")
    tenant.patch(f"/contacts/{contact['id']}", json={"last_name": "Kay", "attributes": {"x": 1}})
    [updated] = events(service, tenant, "contact.updated")
    assert updated["data"]["changed"] == ["attributes", "last_name"]
    assert updated["data"]["contact"]["last_name"] == "Kay"


def test_delete_is_permanent_and_frees_the_address(service, tenant):
    contact = make_contact(tenant, "l@example.org")
    response = tenant.delete(f"/contacts/{contact['id']}")
    assert response.status_code == 200 and response.json()["data"] == {"id": contact["id"], "deleted": True}
    assert_error(tenant.get(f"/contacts/{contact['id']}"), 404, "not_found")

    async def raw(db):
        return await db.contacts.find_one({"_id": contact["id"]})
    assert service.store.run(raw) is None
    make_contact(tenant, "l@example.org")


def test_bulk_delete_deletes_own_contacts_and_reports_the_rest(service, tenant):
    mine = [make_contact(tenant, f"bulk{i}@example.org")["id"] for i in range(3)]
    keep = make_contact(tenant, "keep@example.org")
    foreign = make_contact(service.tenant(), "bulkforeign@example.org")["id"]
    unknown = str(uuid.uuid4())
    response = tenant.post("/contacts/bulk-delete", json={"contact_ids": mine + [foreign, unknown, mine[0]]})
    assert response.status_code == 200, response.text
    assert response.json()["data"] == {"deleted": 3, "not_found": [foreign, unknown]}
    remaining = tenant.get("/contacts").json()["data"]
    assert [c["id"] for c in remaining] == [keep["id"]]
    assert service.store.run(contact_store.get, foreign_ws(service, {"id": foreign}), foreign) is not None


@pytest.mark.parametrize("payload, path", [
    ({}, "contact_ids"),
    ({"contact_ids": []}, "contact_ids"),
    ({"contact_ids": [str(uuid.uuid4()) for _ in range(5001)]}, "contact_ids"),
    ({"contact_ids": [5]}, "contact_ids[0]"),
    ({"contact_ids": "abc"}, "contact_ids"),
])
def test_bulk_delete_refuses_bad_id_arrays(tenant, payload, path):
    assert_error(tenant.post("/contacts/bulk-delete", json=payload), 400, "validation_error", path)


def test_bulk_delete_accepts_5000_ids(tenant):
    response = tenant.post("/contacts/bulk-delete", json={"contact_ids": [str(uuid.uuid4()) for _ in range(5000)]})
    assert response.status_code == 200 and response.json()["data"]["deleted"] == 0


@pytest.fixture
def people(tenant):
    rows = [("ann.smith@example.org", "Ann", "Smith"), ("bob@smith.example", "Bob", "Jones"),
            ("carla@example.org", "Carla", "Annersby"), ("dave@example.org", None, None)]
    made = {}
    for email, first, last in rows:
        made[email.split("@")[0]] = make_contact(tenant, email, first_name=first, last_name=last)
    return made


def ids(response):
    assert response.status_code == 200, response.text
    return {c["id"] for c in response.json()["data"]}


def test_search_matches_every_word_across_email_and_names_case_insensitively(tenant, people):
    assert ids(tenant.get("/contacts", params={"search": "smith"})) == {
        people["ann.smith"]["id"], people["bob"]["id"]}
    assert ids(tenant.get("/contacts", params={"search": "ANN smith"})) == {people["ann.smith"]["id"]}
    assert ids(tenant.get("/contacts", params={"search": "ann"})) == {
        people["ann.smith"]["id"], people["carla"]["id"]}
    assert ids(tenant.get("/contacts", params={"search": "bob jones example"})) == {people["bob"]["id"]}
    assert ids(tenant.get("/contacts", params={"search": "ann jones"})) == set()
    assert ids(tenant.get("/contacts", params={"search": "a.s"})) == set()  # regex characters are literal


def test_subscribed_and_bounced_filters(service, tenant, people):
    tenant.patch(f"/contacts/{people['bob']['id']}", json={"subscribed": False})
    service.store.run(contact_store.mark_bounced, tenant.workspace_id, "DAVE@example.org")
    everyone = {c["id"] for c in people.values()}
    assert ids(tenant.get("/contacts", params={"subscribed": "false"})) == {people["bob"]["id"]}
    assert ids(tenant.get("/contacts", params={"subscribed": "true"})) == everyone - {people["bob"]["id"]}
    assert ids(tenant.get("/contacts", params={"bounced": "true"})) == {people["dave"]["id"]}
    assert ids(tenant.get("/contacts", params={"bounced": "false"})) == everyone
    assert ids(tenant.get("/contacts", params={"bounced": "true", "search": "dave"})) == {people["dave"]["id"]}


def test_pagination_pages_through_contacts_newest_first(tenant, people):
    first = tenant.get("/contacts", params={"limit": 3}).json()
    assert first["pagination"] == {"total": 4, "limit": 3, "offset": 0, "has_more": True}
    second = tenant.get("/contacts", params={"limit": 3, "offset": 3}).json()
    assert second["pagination"]["has_more"] is False
    seen = [c["id"] for c in first["data"] + second["data"]]
    assert len(set(seen)) == 4
    assert seen[0] == people["dave"]["id"]


@pytest.mark.parametrize("params, path", [
    ({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"offset": -1}, "offset"),
    ({"limit": "ten"}, "limit"), ({"subscribed": "maybe"}, "subscribed"),
])
def test_list_query_errors_name_the_parameter(tenant, params, path):
    assert_error(tenant.get("/contacts", params=params), 400, "validation_error", path)


def test_duplicates_are_contacts_in_two_or_more_lists_with_their_lists(tenant, people):
    a, b, c = (make_list(tenant, name) for name in ("A", "B", "C"))
    for lst, members in ((a, ["ann.smith", "bob", "carla"]), (b, ["ann.smith", "bob"]), (c, ["carla", "dave"])):
        tenant.post(f"/lists/{lst['id']}/members", json={"contact_ids": [people[m]["id"] for m in members]})
    response = tenant.get("/contacts/duplicates")
    assert ids(response) == {people[m]["id"] for m in ("ann.smith", "bob", "carla")}
    by_id = {d["id"]: d for d in response.json()["data"]}
    assert sorted(x["name"] for x in by_id[people["carla"]["id"]]["lists"]) == ["A", "C"]
    assert ids(tenant.get("/contacts/duplicates", params={"list_id": c["id"]})) == {people["carla"]["id"]}
    assert ids(tenant.get("/contacts/duplicates", params={"list_id": b["id"]})) == {
        people["ann.smith"]["id"], people["bob"]["id"]}
    limited = tenant.get("/contacts/duplicates", params={"limit": 1}).json()
    assert limited["pagination"]["total"] == 3 and len(limited["data"]) == 1


def test_duplicates_with_an_unknown_or_foreign_list_is_not_found_and_a_malformed_one_is_refused(service, tenant):
    foreign = make_list(service.tenant(), "Theirs")
    assert_error(tenant.get("/contacts/duplicates", params={"list_id": foreign["id"]}), 404, "not_found")
    assert_error(tenant.get("/contacts/duplicates", params={"list_id": str(uuid.uuid4())}), 404, "not_found")
    assert_error(tenant.get("/contacts/duplicates", params={"list_id": "nope"}), 400, "validation_error", "list_id")


def test_read_only_key_can_list_but_not_create_contacts(service, tenant):
    reader = service.extra_key(tenant, permissions=["contacts:read"])
    assert reader.get("/contacts").status_code == 200
    assert_error(reader.post("/contacts", json={"email": "m@example.org"}), 403, "forbidden")


def test_patches_cannot_grow_attributes_past_the_cap_one_at_a_time(tenant):
    contact = make_contact(tenant, "many@example.org", attributes={f"a{i}": i for i in range(99)})
    assert tenant.patch(f"/contacts/{contact['id']}", json={"attributes": {"a99": 99}}).status_code == 200
    assert_error(tenant.patch(f"/contacts/{contact['id']}", json={"attributes": {"one_more": 1}}),
          400, "validation_error", "attributes")
    # replacing one (null clears it) keeps the count at 100
    swap = tenant.patch(f"/contacts/{contact['id']}", json={"attributes": {"a0": None, "one_more": 1}})
    assert swap.status_code == 200 and len(swap.json()["data"]["attributes"]) == 100


def test_concurrent_patches_of_different_attributes_lose_none_over_100_rounds(tenant):
    """Three PATCHes at once, each setting its own attribute to the round's number, all
    answered 200: afterwards every one holds (the update is a compare-and-set on an integer
    version; guarded on `updated_at`, one was lost in most rounds on the embedded store)."""
    from concurrent.futures import ThreadPoolExecutor
    contact = make_contact(tenant, "racy@example.org")
    url = f"/contacts/{contact['id']}"
    lost = []
    with ThreadPoolExecutor(max_workers=3) as pool:
        for round_number in range(100):
            answers = list(pool.map(
                lambda name, number=round_number: tenant.patch(url, json={"attributes": {name: number}}),
                ("a", "b", "c")))
            assert [a.status_code for a in answers] == [200, 200, 200], [a.text for a in answers]
            stored = tenant.get(url).json()["data"]["attributes"]
            if stored != {"a": round_number, "b": round_number, "c": round_number}:
                lost.append((round_number, stored))
    assert lost == []
