"""The `postroom` administration commands against the test store, checked through the
running front: what the CLI creates is what the API accepts."""

import json
import subprocess

from tests.support.services import postroom_command


def postroom(service, *args, expect=0):
    result = subprocess.run(postroom_command(*args), env=service.env, capture_output=True, text=True, timeout=120)
    assert result.returncode == expect, (args, result.returncode, result.stdout, result.stderr[-2000:])
    return result


def as_json(result):
    return json.loads(result.stdout.strip().splitlines()[-1])


def create_workspace(service, name="CLI Co", *extra):
    return as_json(postroom(service, "workspace", "create", name, *extra, "--json"))


def create_key(service, workspace_id, *extra):
    return as_json(postroom(service, "key", "create", "--workspace", workspace_id, *extra, "--json"))


def test_workspace_create_prints_one_json_object_and_stores_the_workspace(service):
    created = create_workspace(service, "Acme Widgets", "--from-email", "Hello@Acme.example")
    assert set(created) >= {"id", "name"} and created["name"] == "Acme Widgets"

    async def stored(db):
        return await db.workspaces.find_one({"_id": created["id"]})
    doc = service.store.run(stored)
    assert doc["name"] == "Acme Widgets"
    assert doc["default_from_email"] == "Hello@acme.example"  # domain lower-cased, as the API does
    assert doc["sending_local_part"]

    listed = as_json(postroom(service, "workspace", "list", "--json"))
    assert {"id": created["id"], "name": "Acme Widgets"}.items() <= next(
        w for w in listed if w["id"] == created["id"]).items()


def test_a_created_live_key_is_shown_once_and_works_against_the_front(service):
    workspace = create_workspace(service)
    key = create_key(service, workspace["id"], "--name", "deploy")
    assert key["key"].startswith("tm_live_")
    assert key["type"] == "live"

    client = service.client(key["key"])
    permissions = client.get("/api-key/permissions").json()["data"]
    assert permissions["id"] == key["id"]
    assert permissions["name"] == "deploy"
    assert permissions["workspace_id"] == workspace["id"]
    assert permissions["permissions"] == ["*"]

    async def stored(db):
        return await db.api_keys.find_one({"_id": key["id"]})
    assert key["key"] not in json.dumps(service.store.run(stored), default=str)


def test_sandbox_key_with_permissions_and_limits(service):
    workspace = create_workspace(service)
    key = create_key(service, workspace["id"], "--sandbox", "--permissions", "email:read,contacts:*",
                     "--rate-limit", "7", "--email-rate-limit", "3")
    assert key["key"].startswith("tm_test_") and key["type"] == "sandbox"
    client = service.client(key["key"])
    response = client.get("/api-key/permissions")
    data = response.json()["data"]
    assert data["is_sandbox"] is True
    assert data["permissions"] == ["email:read", "contacts:*"]
    assert data["rate_limit"] == 7 and data["email_rate_limit"] == 3
    assert response.headers["X-RateLimit-Limit"] == "7"
    refused = client.post("/email/send", json={"to": "a@example.org", "subject": "x", "text": "y"})
    assert refused.status_code == 403


def test_key_list_shows_keys_without_their_secret_and_revoke_turns_them_off(service):
    workspace = create_workspace(service)
    first = create_key(service, workspace["id"], "--name", "one")
    second = create_key(service, workspace["id"], "--name", "two")

    listed = as_json(postroom(service, "key", "list", "--workspace", workspace["id"], "--json"))
    assert [k["id"] for k in listed] == [first["id"], second["id"]]
    assert [k["revoked"] for k in listed] == [False, False]
    assert all(k["prefix"] == created["key"][:12] for k, created in zip(listed, (first, second)))
    assert first["key"] not in json.dumps(listed) and "hash" not in json.dumps(listed)

    revoked = as_json(postroom(service, "key", "revoke", first["id"], "--json"))
    assert revoked == {"id": first["id"], "revoked": True}
    assert service.client(first["key"]).get("/api-key/permissions").status_code == 401
    assert service.client(second["key"]).get("/api-key/permissions").status_code == 200

    listed = as_json(postroom(service, "key", "list", "--workspace", workspace["id"], "--json"))
    assert [k["revoked"] for k in listed] == [True, False]
    text = postroom(service, "key", "list", "--workspace", workspace["id"]).stdout
    assert "revoked" in text and "active" in text


def test_refusals_exit_non_zero_and_say_why(service):
    unknown_ws = postroom(service, "key", "create", "--workspace", "no-such-workspace", "--json", expect=1)
    assert "no workspace" in unknown_ws.stderr
    assert unknown_ws.stdout == ""

    workspace = create_workspace(service)
    bad_permission = postroom(service, "key", "create", "--workspace", workspace["id"],
                              "--permissions", "email:read,mail:send", expect=2)
    assert "mail:send" in bad_permission.stderr
    bad_limit = postroom(service, "key", "create", "--workspace", workspace["id"], "--rate-limit", "0", expect=2)
    assert "at least 1" in bad_limit.stderr
    bad_sender = postroom(service, "workspace", "create", "Typo Inc", "--from-email", "hello.example", expect=2)
    assert "--from-email" in bad_sender.stderr
    unknown_key = postroom(service, "key", "revoke", "no-such-key", expect=1)
    assert "no key" in unknown_key.stderr

    async def keys(db):
        return await db.api_keys.count_documents({"workspace_id": workspace["id"]})
    assert service.store.run(keys) == 0
