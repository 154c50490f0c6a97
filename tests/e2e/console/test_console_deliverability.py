"""Deliverability by destination domain, from what the real SMTP receiver answered:
delivered, refused for good, put off."""

import uuid

import pytest
from playwright.sync_api import expect

from tests.support.console import go_to, new_page, screenshots, sign_in, signed_in_client
from tests.support.polling import wait_status, wait_until


@pytest.fixture(scope="module")
def tenant(service):
    return service.tenant()


def _send(tenant, to: str) -> str:
    answer = tenant.post("/email/send", json={"to": to, "subject": "Rates", "text": "hello"})
    assert answer.status_code == 202, answer.text
    return answer.json()["data"]["message_id"]


def _deferred_once(tenant, message_id: str) -> bool:
    timeline = tenant.get(f"/email/{message_id}").json()["data"]["timeline"]
    return any(e["type"] == "smtp_attempt" and e.get("outcome") == "deferred" for e in timeline)


def test_rates_by_destination_domain_follow_what_the_receiver_answered(service, tenant, browser, screenshot_dir):
    domain = f"dlv-{uuid.uuid4().hex[:8]}.example"
    accepted, refused, put_off = (f"{name}@{domain}" for name in ("ann", "bob", "cy"))
    service.smtp.reject(refused)
    service.smtp.defer(put_off, 1)
    wait_status(tenant, _send(tenant, accepted), "delivered")
    wait_status(tenant, _send(tenant, refused), "bounced")
    later = _send(tenant, put_off)
    wait_until(lambda: _deferred_once(tenant, later), timeout=30, what="the deferral")

    page = new_page(browser)
    sign_in(page, service, tenant.key)
    go_to(page, "Deliverability")
    row = page.locator(f"tr[id='domain-{domain}']")
    expect(row).to_be_visible()
    cells = row.get_by_role("cell").all_inner_texts()
    sent, bounce, complaint, deferral = cells[0], cells[1:4], cells[4:7], cells[7:10]
    assert sent == "2"  # a final answer each: accepted, refused
    assert bounce == ["50.0 %"] * 3  # 1 of 2 sent, today being in every window
    assert complaint == ["0.0 %"] * 3  # none of 1 delivered
    assert deferral == ["33.3 %"] * 3  # 1 of 3 attempts
    screenshots(page, screenshot_dir, "deliverability")
    page.close()


def test_another_workspace_sees_nothing_of_these_domains(service, tenant):
    domain = f"dlv-{uuid.uuid4().hex[:8]}.example"
    wait_status(tenant, _send(tenant, f"dee@{domain}"), "delivered")
    assert domain in signed_in_client(service, tenant.key).get("/console/deliverability").text
    assert domain not in signed_in_client(service, service.tenant().key).get("/console/deliverability").text
