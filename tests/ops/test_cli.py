"""The `postroom` administration commands against the test store, checked through the
running front: what the CLI creates is what the API accepts."""

import json
import os
import signal
import time

import pytest

from mongo import processes
from mongo.recent import FRESH_SECONDS
from tests.support.api import assert_error
from tests.support.harness import StoreThread
from tests.support.polling import wait_until
from tests.support.services import Process, run_postroom

# `postroom scheduler` is gone this soon after SIGTERM (issue #30.7: it took 13-45 s).
SCHEDULER_STOP_SECONDS = 5.0


def postroom(service, *args, expect=0):
    return run_postroom(service.env, *args, expect=expect)


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
    assert all(k["prefix"] == created["key"][:12] for k, created in zip(listed, (first, second), strict=True))
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


def _send(client, to, html):
    return client.post("/email/send", json={"to": to, "subject": "Monthly", "html": html})


def test_workspace_set_changes_sender_company_details_and_monthly_limit_as_mail_shows(service):
    workspace = create_workspace(service, "Settable")
    client = service.client(create_key(service, workspace["id"])["key"])
    assert _send(client, "before-set@example.org", "<p>x</p>").json()["error"]["code"] == "missing_from_email"

    changed = as_json(postroom(service, "workspace", "set", workspace["id"], "--from-email", "news@Settable.example",
                               "--company-name", "Settable Ltd", "--company-address", r"1 Main St\nSpringfield",
                               "--monthly-limit", "1", "--json"))
    assert changed == {"id": workspace["id"], "name": "Settable", "from_email": "news@settable.example",
                       "company_name": "Settable Ltd", "company_address": "1 Main St\nSpringfield",
                       "monthly_email_limit": 1}

    # A running front sees a workspace changed elsewhere within mongo/recent.FRESH_SECONDS; a
    # send refused meanwhile (no sender yet) counts nothing, so asking again is harmless.
    sent = wait_until(lambda: (lambda r: r if r.status_code != 400 else None)(
        _send(client, "after-set@example.org", "<p>{{company_name}} | {{company_address}}</p>")),
        timeout=FRESH_SECONDS + 5, interval=0.5, what="the new sender seen by the front")
    assert sent.status_code == 202, sent.text
    [received] = service.smtp.wait_for("after-set@example.org", timeout=30)
    assert "Settable Ltd | 1 Main St" in received.body("html")
    assert received.message["Reply-To"] == "news@settable.example"
    over = _send(client, "over-limit@example.org", "<p>x</p>")
    assert_error(over, 403, "limit_reached")

    unlimited = as_json(postroom(service, "workspace", "set", workspace["id"], "--monthly-limit", "0", "--json"))
    assert unlimited["monthly_email_limit"] == 0 and unlimited["company_name"] == "Settable Ltd"
    wait_until(lambda: _send(client, "unlimited@example.org", "<p>x</p>").status_code == 202,
               timeout=FRESH_SECONDS + 5, interval=0.5, what="the lifted limit seen by the front")


def test_workspace_set_refuses_bad_input_with_exit_2_and_unknown_workspaces_with_exit_1(service):
    workspace = create_workspace(service, "Strict")
    for extra, message in ((["--from-email", "not-an-address"], "--from-email"),
                           (["--monthly-limit", "-1"], "--monthly-limit"),
                           (["--company-name", "x" * 201], "--company-name"),
                           (["--company-name", "bell\x07"], "--company-name"),
                           ([], "nothing to set")):
        refused = postroom(service, "workspace", "set", workspace["id"], *extra, expect=2)
        assert message in refused.stderr, (extra, refused.stderr)
    postroom(service, "workspace", "set", "00000000-0000-0000-0000-000000000000", "--company-name", "X", expect=1)

    async def stored(db):
        return await db.workspaces.find_one({"_id": workspace["id"]})
    doc = service.store.run(stored)
    assert doc["settings"].get("company_name") is None and doc["monthly_email_limit"] is None


def test_domain_limit_set_and_list_round_trip_through_the_store(service):
    set_row = as_json(postroom(service, "domain-limit", "set", "Warmup-CLI.Example.", "--rate-per-minute", "30",
                               "--concurrency", "2", "--json"))
    assert set_row == {"domain": "warmup-cli.example", "rate_per_minute": 30, "concurrency": 2}
    as_json(postroom(service, "domain-limit", "set", "warmup-cli.example", "--rate-per-minute", "60",
                     "--concurrency", "0", "--json"))
    listed = as_json(postroom(service, "domain-limit", "list", "--json"))
    [row] = [r for r in listed if r["domain"] == "warmup-cli.example"]
    assert (row["rate_per_minute"], row["concurrency"]) == (60, 0) and row["updated_at"]

    async def stored(db):
        return await db.domain_limits.find_one({"_id": "warmup-cli.example"})
    assert service.store.run(stored)["rate_per_minute"] == 60
    assert "warmup-cli.example" in postroom(service, "domain-limit", "list").stdout


def test_domain_limit_set_refuses_bad_input_with_exit_2(service):
    for args in (["not a domain", "--rate-per-minute", "1", "--concurrency", "1"],
                 ["ok-domain.example", "--rate-per-minute", "-1", "--concurrency", "1"],
                 ["ok-domain.example", "--rate-per-minute", "1", "--concurrency", "-5"],
                 ["ok-domain.example", "--rate-per-minute", "1"]):
        refused = postroom(service, "domain-limit", "set", *args, expect=2)
        assert refused.stderr.strip(), args
    assert all(r["domain"] != "ok-domain.example" for r in as_json(postroom(service, "domain-limit", "list", "--json")))


@pytest.mark.e2e  # a scheduler process of its own
def test_the_scheduler_exits_within_seconds_of_sigterm_in_the_middle_of_its_passes(service_env, run_dir,
                                                                                     store_url, database_name):
    env, _ = service_env
    log_dir = run_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    store = StoreThread(store_url, database_name)
    scheduler = Process("scheduler-sigterm", ["scheduler"], env, log_dir)
    try:
        # this scheduler's own passes (the session's scheduler writes to the same database)
        own = processes.process_name("scheduler").rsplit(":", 1)[0] + f":{scheduler.proc.pid}"

        def own_passes() -> int:
            doc = store.run(lambda db: db.processes.find_one({"_id": own}, {"passes": 1}))
            return (doc or {}).get("passes", 0)
        wait_until(lambda: own_passes() >= 2, timeout=60,
                   what="the scheduler's passes")  # running, a pass every 0.2 s: mostly mid-pass
        stopped_at = time.monotonic()
        os.killpg(scheduler.proc.pid, signal.SIGTERM)
        code = scheduler.proc.wait(timeout=60)
        took = time.monotonic() - stopped_at
    finally:
        scheduler.stop()
        store.close()
    print(f"\nscheduler stopped {took:.2f} s after SIGTERM")
    assert code == 0, scheduler.tail()
    assert took < SCHEDULER_STOP_SECONDS, scheduler.tail()


def test_help_shows_each_options_default_and_what_the_email_limit_counts(service):
    """A newcomer reads the defaults from --help (issue #37's first hour)."""
    up = run_postroom(service.env, "up", "--help").stdout
    assert "(default: 127.0.0.1)" in up and "(default: 8080)" in up and "(default: 8)" in up
    # the embedded store's port cannot be chosen (it has none, by design): up says where it is instead
    assert "no TCP port, by design" in " ".join(up.split()) and "`postroom store url`" in " ".join(up.split())
    worker = " ".join(run_postroom(service.env, "worker", "--help").stdout.split())
    assert "worker processes (default: 2)" in worker
    key = " ".join(run_postroom(service.env, "key", "create", "--help").stdout.split())
    assert "emails per minute: a send counts 1, a batch of N messages N" in key
    assert "(default: None)" not in key and "(default: False)" not in key
