"""Delete-all (soft delete), its confirmation, restore within 30 days, and the activity log."""

import time
import uuid

import pytest

from tests.support.api import assert_error
from tests.support.audience import make_contact, make_list, make_tag


@pytest.fixture
def audience(tenant):
    newsletter = make_list(tenant, "Newsletter")
    vip = make_tag(tenant, "VIP")
    contacts = [make_contact(tenant, f"p{i}@example.org", list_id=newsletter["id"]) for i in range(3)]
    tenant.post(f"/tags/{vip['id']}/contacts", json={"contact_ids": [c["id"] for c in contacts]})
    return {"list": newsletter, "tag": vip, "contacts": contacts}


def total(tenant, path="/contacts"):
    response = tenant.get(path)
    assert response.status_code == 200, response.text
    return response.json()["pagination"]["total"]


@pytest.mark.parametrize("payload", [{}, {"confirm": False}, {"confirm": None}])
def test_delete_all_without_confirm_true_deletes_nothing(tenant, audience, payload):
    assert_error(tenant.post("/contacts/delete-all", json=payload), 400, "confirmation_required")
    assert total(tenant) == 3
    assert tenant.get("/contacts/activity").json()["data"] == []


def test_delete_all_with_no_body_at_all_asks_for_confirmation_and_deletes_nothing(tenant, audience):
    assert_error(tenant.client.post("/contacts/delete-all"), 400, "confirmation_required")
    assert_error(tenant.client.post("/contacts/delete-all", content=b"  ",
                                    headers={"Content-Type": "application/json"}),
                 400, "confirmation_required")
    assert total(tenant) == 3


@pytest.mark.parametrize("payload, path", [({"confirm": "true"}, "confirm"), ({"confirm": 1}, "confirm"),
                                           ({"confirm": True, "force": True}, "force")])
def test_delete_all_with_a_malformed_body_is_a_validation_error_and_deletes_nothing(tenant, audience, payload, path):
    assert_error(tenant.post("/contacts/delete-all", json=payload), 400, "validation_error", path)
    response = tenant.client.post("/contacts/delete-all", content=b'{"confirm": tru',
                                  headers={"Content-Type": "application/json"})
    assert_error(response, 400, "validation_error")
    assert total(tenant) == 3


def test_delete_all_hides_contacts_from_every_read(tenant, audience):
    response = tenant.post("/contacts/delete-all", json={"confirm": True})
    assert response.status_code == 200, response.text
    body = response.json()["data"]
    assert body["deleted"] == 3 and body["deletion_id"] and body["restorable_until"] > "2000"
    assert total(tenant) == 0
    assert_error(tenant.get(f"/contacts/{audience['contacts'][0]['id']}"), 404, "not_found")
    assert tenant.get(f"/tags/{audience['tag']['id']}").json()["data"]["contact_count"] == 0
    assert total(tenant, f"/tags/{audience['tag']['id']}/contacts") == 0
    assert tenant.get(f"/lists/{audience['list']['id']}").json()["data"]["member_count"] == 0
    assert total(tenant, f"/lists/{audience['list']['id']}/members") == 0
    assert_error(tenant.patch(f"/contacts/{audience['contacts'][0]['id']}", json={"first_name": "X"}), 404, "not_found")


def test_delete_all_touches_no_other_workspace(service, tenant, audience):
    other = service.tenant()
    make_contact(other, "p0@example.org")
    tenant.post("/contacts/delete-all", json={"confirm": True})
    assert total(other) == 1


def test_soft_deleted_addresses_can_be_added_again(tenant, audience):
    tenant.post("/contacts/delete-all", json={"confirm": True})
    again = make_contact(tenant, "p0@example.org")
    assert again["id"] != audience["contacts"][0]["id"]
    assert total(tenant) == 1


def test_restore_brings_back_contacts_with_their_lists_and_tags(tenant, audience):
    deletion = tenant.post("/contacts/delete-all", json={"confirm": True}).json()["data"]
    response = tenant.post("/contacts/restore", json={})
    assert response.status_code == 200, response.text
    body = response.json()["data"]
    assert body["deletion_id"] == deletion["deletion_id"]
    assert body["restored"] == 3 and body["skipped"] == []
    assert total(tenant) == 3
    restored = tenant.get(f"/contacts/{audience['contacts'][1]['id']}").json()["data"]
    assert restored["lists"] == [{"id": audience["list"]["id"], "name": "Newsletter"}]
    assert restored["tags"] == [{"id": audience["tag"]["id"], "name": audience["tag"]["name"]}]
    assert tenant.get(f"/tags/{audience['tag']['id']}").json()["data"]["contact_count"] == 3


def test_restore_skips_addresses_added_again_since(tenant, audience):
    tenant.post("/contacts/delete-all", json={"confirm": True})
    newer = make_contact(tenant, "P1@example.org")
    body = tenant.post("/contacts/restore", json={}).json()["data"]
    assert body["restored"] == 2 and body["skipped"] == ["p1@example.org"]
    assert {c["id"] for c in tenant.get("/contacts").json()["data"]} == {
        audience["contacts"][0]["id"], audience["contacts"][2]["id"], newer["id"]}


def test_restore_names_a_delete_all_by_its_id(tenant, audience):
    first = tenant.post("/contacts/delete-all", json={"confirm": True}).json()["data"]
    make_contact(tenant, "later@example.org")
    tenant.post("/contacts/delete-all", json={"confirm": True})
    body = tenant.post("/contacts/restore", json={"deletion_id": first["deletion_id"]}).json()["data"]
    assert body["restored"] == 3
    assert "later@example.org" not in {c["email"] for c in tenant.get("/contacts").json()["data"]}


def test_restore_without_a_delete_all_or_of_another_workspace_is_not_found(service, tenant):
    assert_error(tenant.post("/contacts/restore", json={}), 404, "not_found")
    other = service.tenant()
    make_contact(other, "x@example.org")
    theirs = other.post("/contacts/delete-all", json={"confirm": True}).json()["data"]
    assert_error(tenant.post("/contacts/restore", json={"deletion_id": theirs["deletion_id"]}), 404, "not_found")
    assert_error(tenant.post("/contacts/restore", json={"deletion_id": str(uuid.uuid4())}), 404, "not_found")
    assert_error(tenant.post("/contacts/restore", json={"deletion_id": 7}), 400, "validation_error", "deletion_id")


def test_restore_after_the_30_day_window_is_refused(service, tenant, audience):
    deletion = tenant.post("/contacts/delete-all", json={"confirm": True}).json()["data"]

    async def age(db):
        await db.activity.update_one({"workspace_id": tenant.workspace_id, "action": "contacts.delete_all"},
                                     {"$set": {"details.restorable_until": "2000-01-01T00:00:00.000000Z"}})
    service.store.run(age)
    assert_error(tenant.post("/contacts/restore", json={"deletion_id": deletion["deletion_id"]}), 409, "conflict")
    assert total(tenant) == 0


@pytest.mark.e2e
def test_contacts_past_the_restore_window_are_purged_by_the_scheduler(service, tenant, audience):
    deletion = tenant.post("/contacts/delete-all", json={"confirm": True}).json()["data"]

    async def age(db):
        entry = await db.activity.find_one({"workspace_id": tenant.workspace_id, "action": "contacts.delete_all"})
        details = {**entry["details"], "restorable_until": "2000-01-01T00:00:00.000000Z"}
        # (purge_ms: the integer the scheduler finds a due purge by)
        await db.activity.update_one({"_id": entry["_id"]}, {"$set": {"details": details, "purge_ms": 0}})

    async def remaining(db):
        return await db.contacts.count_documents({"workspace_id": tenant.workspace_id,
                                                  "deletion_id": deletion["deletion_id"]})
    assert service.store.run(remaining) == 3
    service.store.run(age)
    deadline = time.monotonic() + 20
    while service.store.run(remaining) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert service.store.run(remaining) == 0
    [entry] = tenant.get("/contacts/activity").json()["data"]
    assert entry["details"]["purged"] is True


def test_activity_log_records_delete_all_and_restore_newest_first(service, tenant, audience):
    tenant.post("/contacts/delete-all", json={"confirm": True})
    tenant.post("/contacts/restore", json={})
    log = tenant.get("/contacts/activity").json()
    assert [e["action"] for e in log["data"]] == ["contacts.restore", "contacts.delete_all"]
    assert log["data"][1]["details"]["count"] == 3
    assert log["data"][0]["key_id"] == tenant.key_id
    only = tenant.get("/contacts/activity", params={"action": "contacts.restore"}).json()
    assert only["pagination"]["total"] == 1
    assert service.tenant().get("/contacts/activity").json()["data"] == []
