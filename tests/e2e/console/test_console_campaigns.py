"""A campaign watched in the console until it is done, its progress chart and counts;
paused and resumed, and cancelled, from the console; refused across workspaces and without
the CSRF token."""

import datetime as dt
import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.support.campaigns import list_with_contacts, make_campaign, make_template, send, wait_campaign
from tests.support.console import csrf_of, go_to, new_page, screenshots, sign_in, signed_in_client
from tests.support.polling import wait_until

RECIPIENTS = 12


@pytest.fixture(scope="module")
def tenant(service):
    return service.tenant()


@pytest.fixture(scope="module")
def stranger(service):
    return signed_in_client(service, service.tenant().key)


def test_a_person_watches_a_campaign_progress_to_done(service, tenant, browser, screenshot_dir):
    members, contacts = list_with_contacts(
        tenant, [f"fan-{i}-{uuid.uuid4().hex[:6]}@console.example" for i in range(RECIPIENTS)])
    campaign = make_campaign(tenant, template_id=make_template(tenant)["id"], list_id=members["id"],
                             name=f"Watched {uuid.uuid4().hex[:4]}")
    page = new_page(browser)
    sign_in(page, service, tenant.key)
    go_to(page, "Campaigns")
    page.get_by_role("link", name=campaign["name"]).click()
    assert page.locator("#campaign-status").inner_text() == "draft"
    page.get_by_role("link", name="Watch live").click()
    expect(page.get_by_role("link", name="Stop watching")).to_be_visible()
    assert send(tenant, campaign["id"]).status_code == 202
    # the page loads itself again (no test reload) until the campaign is done
    expect(page.locator("#campaign-status")).to_have_text("sent", timeout=60_000)
    page.goto(page.url.split("?")[0])  # the finished campaign, no longer refreshing
    api = tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["stats"]
    assert api["sent"] == api["delivered"] == RECIPIENTS
    assert page.locator("#count-sent").inner_text() == str(RECIPIENTS)
    assert page.locator("#count-delivered").inner_text() == str(RECIPIENTS)
    chart = page.get_by_role("img", name=f"Messages of {campaign['name']} over time")
    assert chart.locator("polyline").count() == 7
    legend = page.locator(".legend li").all_inner_texts()
    assert f"sent: {RECIPIENTS}" in legend and f"delivered: {RECIPIENTS}" in legend and "bounced: 0" in legend
    screenshots(page, screenshot_dir, "campaign")
    go_to(page, "Campaigns")
    screenshots(page, screenshot_dir, "campaigns")
    page.close()


def _scheduled(tenant) -> dict:
    members, _ = list_with_contacts(tenant, [f"later-{uuid.uuid4().hex[:6]}@console.example"])
    campaign = make_campaign(tenant, template_id=make_template(tenant)["id"], list_id=members["id"],
                             name=f"Later {uuid.uuid4().hex[:4]}")
    when = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).isoformat()
    assert tenant.post(f"/campaigns/{campaign['id']}/schedule", json={"send_at": when}).status_code == 200
    return campaign


def test_a_person_cancels_a_scheduled_campaign(service, tenant, browser):
    campaign = _scheduled(tenant)
    page = new_page(browser)
    sign_in(page, service, tenant.key)
    page.goto(f"{service.base_url}/console/campaigns/{campaign['id']}")
    page.get_by_role("button", name="Cancel campaign").click()
    expect(page.get_by_role("status")).to_have_text(re.compile("The campaign was cancelled"))
    assert page.locator("#campaign-status").inner_text() == "cancelled"
    assert page.get_by_role("button", name="Cancel campaign").count() == 0
    page.close()
    assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["status"] == "cancelled"


def test_another_workspace_can_neither_see_nor_cancel_a_campaign(service, tenant, stranger):
    campaign = _scheduled(tenant)
    assert stranger.get(f"/console/campaigns/{campaign['id']}").status_code == 404
    assert campaign["name"] not in stranger.get("/console/campaigns").text
    token = csrf_of(stranger.get("/console/campaigns").text)
    for action in ("cancel", "pause", "resume"):
        assert stranger.post(f"/console/campaigns/{campaign['id']}/{action}",
                             data={"csrf": token}).status_code == 404
    assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["status"] == "scheduled"


def test_cancelling_pausing_or_resuming_without_the_csrf_token_changes_nothing(service, tenant):
    campaign = _scheduled(tenant)
    client = signed_in_client(service, tenant.key)
    for action in ("cancel", "pause", "resume"):
        assert client.post(f"/console/campaigns/{campaign['id']}/{action}", data={"csrf": "forged"}).status_code == 403
        assert client.post(f"/console/campaigns/{campaign['id']}/{action}").status_code == 403
    assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["status"] == "scheduled"


PAUSED_RECIPIENTS = 60


def test_a_person_pauses_and_resumes_a_sending_campaign(service, tenant, browser, screenshot_dir):
    domain = f"paused-{uuid.uuid4().hex[:6]}.example"
    addresses = [f"r{i:02d}@{domain}" for i in range(PAUSED_RECIPIENTS)]
    members, _ = list_with_contacts(tenant, addresses)
    campaign = make_campaign(tenant, template_id=make_template(tenant)["id"], list_id=members["id"],
                             name=f"Paused {uuid.uuid4().hex[:4]}")
    service.smtp.slow_down(domain, 1.0)  # mid-send for a minute at most: the pause lands
    try:
        page = new_page(browser)
        sign_in(page, service, tenant.key)
        page.goto(f"{service.base_url}/console/campaigns/{campaign['id']}")
        assert page.get_by_role("button", name="Pause campaign").count() == 0  # a draft
        assert send(tenant, campaign["id"]).status_code == 202
        page.reload()
        assert page.locator("#campaign-status").inner_text() == "sending"
        page.get_by_role("button", name="Pause campaign").click()
        expect(page.get_by_role("status")).to_have_text(re.compile("The campaign was paused"))
        assert page.locator("#campaign-status").inner_text() == "paused"
        assert page.get_by_role("button", name="Pause campaign").count() == 0
        expect(page.get_by_role("button", name="Resume campaign")).to_be_visible()
        expect(page.get_by_role("button", name="Cancel campaign")).to_be_visible()
        screenshots(page, screenshot_dir, "campaign-paused")
        assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["status"] == "paused"
    finally:
        service.smtp.slow_down(domain, 0)
    page.get_by_role("button", name="Resume campaign").click()
    expect(page.get_by_role("status")).to_have_text(re.compile("The campaign was resumed"))
    assert page.locator("#campaign-status").inner_text() in ("sending", "sent")
    page.close()
    wait_campaign(tenant, campaign["id"], "sent", timeout=60)
    counts = wait_until(lambda: (lambda c: c if all(c[a] for a in addresses) else None)(
        service.smtp.recipient_counts()), timeout=10, what="every recipient at the sink")
    assert {counts[a] for a in addresses} == {1}
