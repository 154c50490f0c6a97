"""An operator made with `postroom operator create` signs in with a name and password and
sees queues, the oldest waiting items, backlogs, processes and the scheduler; workspace
keys and operators each reach only their own pages."""

import json
import uuid

import httpx
import pytest
from playwright.sync_api import expect

from mongo import operators
from tests.support.console import csrf_of, new_page, screenshots, signed_in_client
from tests.support.services import run_postroom

PASSWORD = "a long operator passphrase"


@pytest.fixture(scope="module")
def operator(service):
    name = f"ops-{uuid.uuid4().hex[:6]}"
    made = run_postroom(service.env, "operator", "create", name, "--password-stdin", "--json", stdin=PASSWORD + "\n")
    assert json.loads(made.stdout)["name"] == name
    return name


def operator_client(service, name: str, password: str = PASSWORD) -> tuple[httpx.Client, httpx.Response]:
    client = httpx.Client(base_url=service.base_url, timeout=30)
    form = client.get("/console/operator/sign-in")
    return client, client.post("/console/operator/sign-in",
                               data={"csrf": csrf_of(form.text), "name": name, "password": password})


def test_postroom_operator_create_stores_only_a_scrypt_hash_and_refuses_a_taken_name(service, operator):
    stored = service.store.run(operators.get, operator)
    assert stored["password_hash"].startswith("scrypt$") and PASSWORD not in json.dumps(stored)
    taken = run_postroom(service.env, "operator", "create", operator.upper(), "--password-stdin", expect=1,
                         stdin=PASSWORD + "\n")
    assert "exists already" in taken.stderr
    short = run_postroom(service.env, "operator", "create", "someone", "--password-stdin", expect=2, stdin="short\n")
    assert "at least" in short.stderr


def test_an_operator_signs_in_and_sees_queues_processes_lag_and_backlogs(service, operator, browser, screenshot_dir):
    page = new_page(browser)
    page.goto(service.base_url + "/console/operator")
    assert page.url == service.base_url + "/console/operator/sign-in"
    page.get_by_label("Name").fill(operator)
    page.get_by_label("Password").fill(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(service.base_url + "/console/operator")
    processes = page.get_by_role("region", name="Processes")
    for kind in ("front", "worker", "scheduler"):
        expect(processes.get_by_role("row").filter(has_text=kind).first).to_contain_text("alive")
    queues = page.get_by_role("region", name="Queue depths")
    for queue in ("send", "render", "webhooks"):
        expect(queues.get_by_role("rowheader", name=queue, exact=True)).to_be_visible()
    expect(page.locator("#scheduler-lag")).to_be_visible()
    for backlog in ("webhook_deliveries_due", "outbox_for_webhooks"):
        assert page.locator(f"#backlog-{backlog}").inner_text().isdigit()
    screenshots(page, screenshot_dir, "operator")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(service.base_url + "/console/operator/sign-in")
    page.close()


def test_a_wrong_password_or_unknown_name_cannot_sign_in(service, operator):
    for name, password in ((operator, PASSWORD + "x"), ("nobody-" + uuid.uuid4().hex[:6], PASSWORD)):
        _, answer = operator_client(service, name, password)
        assert answer.status_code == 401 and "do not match an operator" in answer.text


def test_operators_and_workspace_keys_reach_only_their_own_pages(service, operator):
    client, answer = operator_client(service, operator)
    assert answer.status_code == 303 and answer.headers["location"] == "/console/operator"
    assert client.get("/console").headers["location"] == "/console/operator"
    assert client.get("/console/campaigns").status_code == 403
    workspace = signed_in_client(service, service.tenant().key)
    assert workspace.get("/console/operator").status_code == 403
    assert httpx.get(service.base_url + "/console/operator").headers["location"] == "/console/operator/sign-in"


def test_password_guesses_against_one_name_are_limited(service):
    name = f"guessed-{uuid.uuid4().hex[:6]}"
    run_postroom(service.env, "operator", "create", name, "--password-stdin", stdin=PASSWORD + "\n")
    statuses = [operator_client(service, name, f"guess number {i}")[1].status_code for i in range(10)]
    assert statuses == [401] * 10
    _, refused = operator_client(service, name)  # the right password, past the limit
    assert refused.status_code == 429 and "retry-after" in refused.headers
