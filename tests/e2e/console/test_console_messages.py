"""Finding a message and reading its timeline; finding a suppression and removing it —
in the browser, on the API's data; refused across workspaces."""

import uuid

import pytest

from tests.support.console import csrf_of, go_to, new_page, screenshots, sign_in, signed_in_client
from tests.support.polling import wait_status


@pytest.fixture(scope="module")
def tenant(service):
    return service.tenant()


@pytest.fixture(scope="module")
def stranger(service):
    """Another workspace, signed in to the console."""
    other = service.tenant()
    return other, signed_in_client(service, other.key)


@pytest.fixture(scope="module")
def delivered(service, tenant):
    """A message sent through the API and delivered at the SMTP sink."""
    address = f"reader-{uuid.uuid4().hex[:8]}@console.example"
    answer = tenant.post("/email/send", json={"to": address, "subject": "Console timeline", "html": "<p>Hi</p>"})
    assert answer.status_code == 202, answer.text
    message_id = answer.json()["data"]["message_id"]
    service.smtp.wait_for(address)
    wait_status(tenant, message_id, "delivered")
    return address, message_id


def test_a_person_finds_a_message_and_reads_its_timeline(service, tenant, delivered, browser, screenshot_dir):
    address, message_id = delivered
    page = new_page(browser)
    sign_in(page, service, tenant.key)
    go_to(page, "Messages")
    page.get_by_label("Recipient").fill(address)
    page.get_by_label("Status").select_option("delivered")
    page.get_by_role("button", name="Search").click()
    assert page.get_by_role("status").inner_text() == "1 message found."
    screenshots(page, screenshot_dir, "messages")
    page.get_by_role("link", name=address).click()
    assert page.url.endswith(f"/console/messages/{message_id}")
    assert page.get_by_role("heading", level=1).inner_text() == "Console timeline"
    steps = page.get_by_role("list", name="Timeline").get_by_role("listitem").all_inner_texts()
    api = tenant.get(f"/email/{message_id}").json()["data"]["timeline"]
    assert [step.split(" — ")[1].split(":")[0] for step in steps] == [e["type"].replace("_", " ") for e in api]
    assert "delivered" in [e["type"] for e in api]
    screenshots(page, screenshot_dir, "message-timeline")
    page.close()


def test_another_workspace_finds_neither_the_message_nor_its_timeline(service, delivered, stranger):
    address, message_id = delivered
    _, client = stranger
    assert client.get(f"/console/messages/{message_id}").status_code == 404
    found = client.get("/console/messages", params={"to": address})
    assert found.status_code == 200 and "0 messages found." in found.text


def test_a_bad_filter_answers_a_page_saying_which(service, tenant):
    client = signed_in_client(service, tenant.key)
    answer = client.get("/console/messages", params={"to": "not an address"})
    assert answer.status_code == 400 and "text/html" in answer.headers["content-type"] and "to:" in answer.text


def test_a_person_finds_a_suppression_and_removes_it(service, tenant, browser, screenshot_dir):
    address = f"gone-{uuid.uuid4().hex[:8]}@console.example"
    assert tenant.post("/suppressions", json={"email": address}).status_code == 201
    page = new_page(browser)
    sign_in(page, service, tenant.key)
    go_to(page, "Suppressions")
    screenshots(page, screenshot_dir, "suppressions")
    page.get_by_label("Address", exact=True).fill(address)
    page.get_by_label("Address", exact=True).press("Enter")
    assert page.get_by_role("row").count() == 2  # the header and the one found
    page.get_by_role("button", name=f"Remove {address}").click()
    assert page.get_by_role("status").inner_text() == f"{address} was removed from the suppression list."
    page.close()
    assert tenant.client.delete(f"/suppressions/{address}").status_code == 404  # gone already


def test_another_workspace_cannot_remove_a_suppression(service, tenant, stranger):
    address = f"kept-{uuid.uuid4().hex[:8]}@console.example"
    assert tenant.post("/suppressions", json={"email": address}).status_code == 201
    _, client = stranger
    token = csrf_of(client.get("/console/suppressions").text)
    assert client.post("/console/suppressions/remove", data={"csrf": token, "email": address}).status_code == 404
    assert client.get("/console/suppressions", params={"email": address}).text.count(address) == 1  # the filter
    assert [s["email"] for s in tenant.get("/suppressions").json()["data"]].count(address) == 1


def test_removing_without_the_csrf_token_changes_nothing(service, tenant):
    address = f"guarded-{uuid.uuid4().hex[:8]}@console.example"
    assert tenant.post("/suppressions", json={"email": address}).status_code == 201
    client = signed_in_client(service, tenant.key)
    assert client.post("/console/suppressions/remove", data={"email": address}).status_code == 403
    assert address in client.get("/console/suppressions", params={"email": address}).text.split("<tbody>")[1]
