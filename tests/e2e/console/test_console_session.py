"""Signing in to the console with a key, the session cookie, its CSRF tokens, its end."""

import json

import httpx
import pytest

from mongo import api_keys, console_sessions
from pipelines.workflows.console_sessions import SESSION_SECONDS, session_id
from tests.support import axe
from tests.support.console import csrf_of, new_page, screenshots, sign_in, signed_in_client
from tests.support.polling import wait_until
from tests.support.services import run_postroom


@pytest.fixture(scope="module")
def tenant(service):
    return service.tenant()


def test_a_person_signs_in_with_the_keyboard_and_signs_out(service, tenant, browser, screenshot_dir):
    page = new_page(browser)
    page.goto(service.base_url + "/console")
    assert page.url == service.base_url + "/console/sign-in"
    screenshots(page, screenshot_dir, "sign-in")
    sign_in(page, service, tenant.key)
    workspace = service.store.run(lambda db: db.workspaces.find_one({"_id": tenant.workspace_id}))
    assert page.get_by_role("heading", level=1).inner_text() == workspace["name"]
    screenshots(page, screenshot_dir, "overview")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(service.base_url + "/console/sign-in")
    page.goto(service.base_url + "/console")
    assert page.url == service.base_url + "/console/sign-in"
    page.close()


def _cookie(response: httpx.Response, name: str) -> str:
    [header] = [h for h in response.headers.get_list("set-cookie") if h.startswith(name + "=")]
    return header


def test_the_session_cookie_is_httponly_strict_and_ends(service, tenant):
    with httpx.Client(base_url=service.base_url) as client:
        form = client.get("/console/sign-in")
        assert "HttpOnly" in _cookie(form, "postroom_console_sign_in")
        answer = client.post("/console/sign-in", data={"csrf": csrf_of(form.text), "key": tenant.key})
    assert answer.status_code == 303
    cookie = _cookie(answer, "postroom_console")
    attributes = {part.strip().split("=")[0].lower(): part for part in cookie.split(";")[1:]}
    assert {"httponly", "max-age", "path", "samesite"} <= set(attributes)
    assert attributes["samesite"].strip() == "SameSite=Strict"
    assert attributes["max-age"].strip() == f"Max-Age={SESSION_SECONDS}"
    assert "secure" not in attributes  # the front is reached over http here; https makes it Secure
    value = cookie.split(";")[0].split("=", 1)[1]
    stored = service.store.run(console_sessions.live, session_id(value))
    assert stored["workspace_id"] == tenant.workspace_id and value not in str(stored)


def test_a_key_without_the_console_permission_or_revoked_cannot_sign_in(service, tenant):
    reader = service.extra_key(tenant, permissions=["campaigns:read"], name="reader")
    for key, status in ((reader.key, 403), ("tm_live_" + "x" * 40, 401)):
        with httpx.Client(base_url=service.base_url) as client:
            form = client.get("/console/sign-in")
            answer = client.post("/console/sign-in", data={"csrf": csrf_of(form.text), "key": key})
        assert answer.status_code == status, answer.text
        assert not [h for h in answer.headers.get_list("set-cookie") if h.startswith("postroom_console=")]


def test_the_sign_in_form_without_its_token_is_refused(service, tenant):
    with httpx.Client(base_url=service.base_url) as client:
        client.get("/console/sign-in")
        answer = client.post("/console/sign-in", data={"csrf": "forged", "key": tenant.key})
    assert answer.status_code == 403 and "expired" in answer.text


def test_without_a_session_pages_send_to_sign_in_and_forms_are_refused(service):
    with httpx.Client(base_url=service.base_url) as client:
        assert client.get("/console").headers["location"] == "/console/sign-in"
        assert client.get("/console/messages").headers["location"] == "/console/sign-in"
        refused = client.post("/console/sign-out", data={"csrf": "x"})
        assert refused.status_code == 401 and "text/html" in refused.headers["content-type"]
        client.cookies.set("postroom_console", "made-up", path="/console")
        assert client.get("/console").status_code == 303


def test_a_form_without_the_sessions_csrf_token_is_refused_and_changes_nothing(service, tenant):
    client = signed_in_client(service, tenant.key)
    home = client.get("/console")
    assert home.status_code == 200
    for data in ({}, {"csrf": "forged"}):
        assert client.post("/console/sign-out", data=data).status_code == 403
    assert client.get("/console").status_code == 200  # still signed in
    assert client.post("/console/sign-out", data={"csrf": csrf_of(home.text)}).status_code == 303
    assert client.get("/console").status_code == 303


def test_a_session_ends_when_it_expires_or_its_key_is_revoked(service, tenant):
    ended = signed_in_client(service, tenant.key)
    value = ended.cookies.get("postroom_console")
    service.store.run(lambda db: db.console_sessions.update_one({"_id": session_id(value)},
                                                               {"$set": {"expires_ms": 1}}))
    assert ended.get("/console").status_code == 303
    other = service.extra_key(tenant, permissions=["console"], name="short-lived")
    revoked = signed_in_client(service, other.key)
    assert revoked.get("/console").status_code == 200
    service.store.run(api_keys.revoke, other.key_id)
    wait_until(lambda: revoked.get("/console").status_code == 303, timeout=10, what="revoked key's session refused")


def test_postroom_key_create_makes_a_key_that_signs_in_to_the_console(service, tenant):
    made = run_postroom(service.env, "key", "create", "--workspace", tenant.workspace_id, "--name", "console only",
                        "--permissions", "console,campaigns:read", "--json")
    key = json.loads(made.stdout)["key"]
    client = signed_in_client(service, key)
    assert client.get("/console").status_code == 200


def test_axe_finds_what_it_is_there_to_find(browser):
    """Guards the accessibility checks: an unlabelled field and text without contrast are reported."""
    page = new_page(browser)
    page.set_content('<html lang="en"><head><title>t</title></head><body><main><h1>Form</h1>'
                     '<input type="text"><p style="color:#eee;background:#fff">faint</p></main></body></html>')
    found = {v["id"]: v["impact"] for v in axe.violations(page)}
    assert found.get("label") == "critical" and found.get("color-contrast") == "serious", found
    page.close()


def test_the_console_is_not_in_the_api_document(service):
    paths = httpx.get(service.base_url + "/openapi.json").json()["paths"]
    assert paths and not [path for path in paths if path.startswith("/console")]


def test_console_requests_count_in_the_keys_rate_limit_and_are_logged_with_the_workspace(service):
    limited = service.tenant(rate_limit=3)
    client = signed_in_client(service, limited.key)
    answers = [client.get("/console") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert "text/html" in answers[-1].headers["content-type"] and int(answers[-1].headers["retry-after"]) >= 1
    assert answers[0].headers["x-ratelimit-limit"] == "3"

    def logged():
        log = (service.log_dir / "front.log").read_text(errors="replace")
        return f"console sign-in workspace_id={limited.workspace_id} key_id={limited.key_id}" in log \
            and "GET /console 200" in log and f"workspace={limited.workspace_id}" in log
    wait_until(logged, timeout=10, what="the sign-in and the console's requests in the front's log")
    assert limited.key not in (service.log_dir / "front.log").read_text(errors="replace")


def test_an_unknown_console_address_answers_the_consoles_own_page(service, tenant):
    client = signed_in_client(service, tenant.key)
    for path in ("/console/nothing-here", "/console/messages/not-a-message-id", "/console/campaigns/123"):
        answer = client.get(path)
        assert answer.status_code == 404 and "text/html" in answer.headers["content-type"], path
        assert "Sign out" in answer.text  # the console's page, for the signed-in person
    assert httpx.get(service.base_url + "/console/nothing-here").status_code == 303  # no session: sign in first
