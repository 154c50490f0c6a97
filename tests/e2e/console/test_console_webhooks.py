"""A webhook delivery that failed for good, shown in the console and replayed from it to a
real receiver; refused across workspaces and without the CSRF token."""


import pytest
from playwright.sync_api import expect

from mongo import webhooks as webhook_store
from tests.support import webhook_deliveries
from tests.support.console import csrf_of, go_to, new_page, screenshots, sign_in, signed_in_client
from tests.support.http_receiver import HttpReceiver
from tests.support.polling import wait_until


@pytest.fixture(scope="module")
def tenant(service):
    return service.tenant()


@pytest.fixture(scope="module")
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hook(tenant, receiver):
    made = tenant.post("/webhooks/triggers", json={"targetUrl": receiver.url, "event": "contact.created"})
    assert made.status_code == 201, made.text
    made = made.json()["data"]
    receiver.trust(made["id"], made["secret"])
    return made


def failed_delivery(service, tenant, receiver, hook) -> str:
    """A delivery on its last attempt (as after two days of failures) that the real worker
    tries once more, answered 503: failed for good."""
    receiver.fail_next(1, status=503)
    delivery_id = webhook_deliveries.on_last_attempt(service, tenant.workspace_id, hook["id"])
    wait_until(lambda: service.store.run(webhook_store.delivery_of, tenant.workspace_id, delivery_id)["status"]
               == "failed", timeout=30, what="the delivery failed for good")
    return delivery_id


def accepted_one(receiver, delivery_id: str) -> list:
    return [r for r in receiver.accepted("contact.created") if r.delivery_id == delivery_id]


def test_a_person_replays_a_failed_webhook_delivery(service, tenant, receiver, hook, browser, screenshot_dir):
    delivery_id = failed_delivery(service, tenant, receiver, hook)
    page = new_page(browser)
    sign_in(page, service, tenant.key)
    go_to(page, "Webhooks")
    row = page.get_by_role("row").filter(has_text=delivery_id)
    expect(row).to_contain_text("HTTP 503")
    expect(row).to_contain_text(receiver.url)
    screenshots(page, screenshot_dir, "webhooks")
    page.get_by_role("button", name=f"Replay contact.created delivery {delivery_id}").click()
    expect(page.get_by_role("status")).to_contain_text(f"Delivery {delivery_id} is queued again")
    page.close()
    [accepted] = receiver.wait_for(lambda r: accepted_one(r, delivery_id), what="the replayed delivery")
    assert accepted.verified
    shown = wait_until(lambda: [d for d in tenant.get(f"/webhooks/{hook['id']}/deliveries").json()["data"]
                                if d["id"] == delivery_id and d["status"] == "delivered"], what="delivered")
    assert [a["status_code"] for a in shown[0]["attempts"]] == [503, 200]


def test_replaying_is_refused_across_workspaces_without_csrf_and_when_not_failed(service, tenant, receiver, hook):
    delivery_id = failed_delivery(service, tenant, receiver, hook)
    path = f"/console/webhooks/deliveries/{delivery_id}/replay"
    stranger = signed_in_client(service, service.tenant().key)
    assert delivery_id not in stranger.get("/console/webhooks").text
    assert stranger.post(path, data={"csrf": csrf_of(stranger.get("/console/webhooks").text)}).status_code == 404
    owner = signed_in_client(service, tenant.key)
    assert owner.post(path, data={}).status_code == 403
    assert service.store.run(webhook_store.delivery_of, tenant.workspace_id, delivery_id)["status"] == "failed"
    token = csrf_of(owner.get("/console/webhooks").text)
    assert owner.post(path, data={"csrf": token}).status_code == 303
    receiver.wait_for(lambda r: accepted_one(r, delivery_id), what="the replayed delivery")
    wait_until(lambda: service.store.run(webhook_store.delivery_of, tenant.workspace_id, delivery_id)["status"]
               == "delivered", what="delivered")
    again = owner.post(path, data={"csrf": token})
    assert again.status_code == 409 and "only a failed delivery can be replayed" in again.text.lower()
