"""Bearer authentication, permissions and workspace scoping, over real HTTP."""

import httpx
import pytest

from mongo.recent import FRESH_SECONDS
from pipelines.core.api_keys import hash_key
from tests.support.api import assert_error
from tests.support.polling import wait_until

SEND = {"to": "someone@example.org", "subject": "Hi", "text": "hello"}


def raw_get(service, path, headers):
    with httpx.Client(base_url=service.api, timeout=30) as client:
        return client.get(path, headers=headers)


@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": ""},
    {"Authorization": "Basic dXNlcjpwYXNz"},
    {"Authorization": "Token tm_live_abcdefghijklmnopqrstuvwxyz"},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer not-a-key"},
    {"Authorization": "Bearer tm_live_"},
    {"Authorization": "Bearer sk_live_abcdefghijklmnopqrstuvwxyz0123456789"},
], ids=["missing", "empty", "basic-scheme", "token-scheme", "scheme-only",
        "malformed-key", "prefix-only", "foreign-prefix"])
@pytest.mark.e2e
def test_missing_or_malformed_authorization_answers_401_unauthorized(service, headers):
    assert_error(raw_get(service, "/api-key/permissions", headers), 401, "unauthorized")


@pytest.mark.e2e
def test_bearer_with_a_blank_token_answers_401(service):
    # httpx refuses header values with trailing blanks, so this one goes over http.client.
    import http.client
    from urllib.parse import urlsplit
    parts = urlsplit(service.base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request("GET", "/api/v1/api-key/permissions", headers={"Authorization": "Bearer    "})
        reply = connection.getresponse()
        status, body = reply.status, reply.read()
    finally:
        connection.close()
    assert status == 401
    assert b'"unauthorized"' in body


@pytest.mark.e2e
def test_well_formed_but_unknown_key_answers_401(service):
    unknown = "tm_live_" + "x" * 43
    assert_error(raw_get(service, "/api-key/permissions", {"Authorization": f"Bearer {unknown}"}), 401, "unauthorized")


def test_revoked_key_answers_401_within_seconds_while_another_key_of_the_workspace_still_works(service, tenant):
    other = service.extra_key(tenant, name="to-revoke")
    assert other.get("/api-key/permissions").status_code == 200  # the front now keeps this key

    from mongo import api_keys as key_store
    service.store.run(key_store.revoke, other.key_id)  # from another process, as the CLI does

    # mongo/recent.py: every front refuses it within FRESH_SECONDS (margin: a loaded box)
    response = wait_until(lambda: (lambda r: r if r.status_code != 200 else None)(other.get("/api-key/permissions")),
                          timeout=FRESH_SECONDS + 3, what="the revoked key refused")
    assert_error(response, 401, "unauthorized")
    assert "revoked" in response.json()["error"]["message"]
    assert tenant.get("/api-key/permissions").status_code == 200


@pytest.mark.e2e
def test_bearer_scheme_is_case_insensitive(service, tenant):
    response = raw_get(service, "/api-key/permissions", {"Authorization": f"bearer {tenant.key}"})
    assert response.status_code == 200


def test_key_whose_workspace_was_deleted_answers_404_workspace_not_found(service):
    orphan = service.tenant()

    async def delete_workspace(db, workspace_id):
        await db.workspaces.delete_one({"_id": workspace_id})
    service.store.run(delete_workspace, orphan.workspace_id)

    response = orphan.get("/api-key/permissions")
    assert_error(response, 404, "workspace_not_found")


def test_key_is_stored_only_as_its_hash(service, tenant):
    async def stored(db, key_id):
        return await db.api_keys.find_one({"_id": key_id})
    doc = service.store.run(stored, tenant.key_id)
    assert tenant.key not in str(doc)
    assert doc["hash"] == hash_key(tenant.key)
    assert doc["prefix"] == tenant.key[:12]


def test_permissions_endpoint_describes_the_calling_key(service, tenant):
    restricted = service.extra_key(tenant, sandbox=True, permissions=["email:read", "contacts:*"],
                                   name="reader", rate_limit=42, email_rate_limit=7)
    data = restricted.get("/api-key/permissions").json()["data"]
    assert data["name"] == "reader"
    assert data["type"] == "sandbox"
    assert data["is_sandbox"] is True
    assert data["permissions"] == ["email:read", "contacts:*"]
    assert data["rate_limit"] == 42
    assert data["email_rate_limit"] == 7
    assert data["id"] == restricted.key_id
    assert restricted.key.startswith("tm_test_")


def test_key_without_the_area_permission_answers_403_forbidden(service, tenant):
    contacts_only = service.extra_key(tenant, permissions=["contacts:*"])
    response = contacts_only.post("/email/send", json=SEND)
    error = assert_error(response, 403, "forbidden")
    assert "email:write" in error["message"]


def test_read_only_key_can_get_but_not_post(service, tenant):
    sent = tenant.post("/email/send", json=SEND)
    assert sent.status_code == 202, sent.text
    message_id = sent.json()["data"]["message_id"]

    reader = service.extra_key(tenant, permissions=["email:read"])
    assert reader.get(f"/email/{message_id}/status").status_code == 200
    refused = reader.post("/email/send", json=SEND)
    assert_error(refused, 403, "forbidden")
    refused_delete = reader.delete(f"/email/{message_id}")
    assert refused_delete.status_code == 403


def test_write_only_key_cannot_read(service, tenant):
    writer = service.extra_key(tenant, permissions=["email:write"])
    sent = writer.post("/email/send", json=SEND)
    assert sent.status_code == 202
    response = writer.get(f"/email/{sent.json()['data']['message_id']}/status")
    assert response.status_code == 403
    assert "email:read" in response.json()["error"]["message"]


def test_another_workspaces_message_answers_404_to_status_and_cancel(service, tenant):
    sent = tenant.post("/email/send", json=SEND)
    message_id = sent.json()["data"]["message_id"]
    stranger = service.tenant()

    status = stranger.get(f"/email/{message_id}/status")
    assert_error(status, 404, "not_found")
    cancel = stranger.delete(f"/email/{message_id}")
    assert_error(cancel, 404, "not_found")
    assert tenant.get(f"/email/{message_id}/status").status_code == 200


def test_another_workspaces_scheduled_message_cannot_be_cancelled(service, tenant):
    import datetime as dt
    send_at = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    scheduled = tenant.post("/email/send", json={**SEND, "send_at": send_at})
    assert scheduled.status_code == 201, scheduled.text
    message_id = scheduled.json()["data"]["message_id"]

    stranger = service.tenant()
    assert stranger.delete(f"/email/{message_id}").status_code == 404
    status = tenant.get(f"/email/{message_id}/status").json()["data"]["status"]
    assert status == "scheduled"


@pytest.mark.e2e
def test_health_ignores_a_bad_key(service):
    response = raw_get(service, "/health", {"Authorization": "Bearer nonsense"})
    assert response.status_code == 200
