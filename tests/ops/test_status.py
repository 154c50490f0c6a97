"""What an operator sees through the real CLI against the running service: `postroom
status`, failed webhook deliveries listed and replayed to a real receiver, failed
messages with their reasons."""

import json
import uuid

import pytest

from mongo import messages as message_store
from pipelines.core.clock import now_iso
from pipelines.messages import delivery_status
from pipelines.messages.retry_schedule import MAX_ATTEMPTS
from tests.ops.test_inbound_admin import left_unparseable
from tests.support import webhook_deliveries
from tests.support.http_receiver import HttpReceiver
from tests.support.polling import wait_until
from tests.support.services import run_postroom


def postroom_json(service, *args, expect=0):
    return json.loads(run_postroom(service.env, *args, "--json", expect=expect).stdout)


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


def failed_message(service, tenant, reason: str) -> str:
    """A message that failed (as the render step fails one it cannot render)."""
    message_id = "msg_" + uuid.uuid4().hex
    now = now_iso()
    doc = {"_id": message_id, "workspace_id": tenant.workspace_id, "to": ["ann@example.com"], "subject": "Hi",
           "status": "queued", "created_at": now, "updated_at": now, "history": [{"status": "queued", "at": now}]}

    async def seed(db):
        await message_store.insert_many(db, [doc])
        await message_store.apply(db, [delivery_status.fail(message_id, reason)])
    service.store.call(seed(service.store.db))
    return message_id


def test_status_shows_live_processes_queues_oldest_items_and_what_is_stuck(service, tenant):
    left_unparseable(service, b"Subject: hello\r\n\r\njust a note\r\n", "msg_" + uuid.uuid4().hex)
    failed_message(service, tenant, "template could not be rendered")
    # the front, the worker and the scheduler each beat on their own
    report = wait_until(lambda: (lambda r: r if {"front", "worker", "scheduler"} <= {
        p["kind"] for p in r["processes"] if p["alive"]} else None)(postroom_json(service, "status")),
        timeout=30, what="front, worker and scheduler heartbeats")
    worker = next(p for p in report["processes"] if p["kind"] == "worker")
    assert "send" in worker["queues"] and "imports" in worker["queues"]
    assert {q["queue"] for q in report["queues"]} >= {"send", "render", "webhooks", "imports"}
    assert report["messages_last_hour"].get("failed", 0) >= 1
    assert report["stuck"]["inbound_reports_unparseable"] >= 1
    assert set(report["oldest"]) == {"queued_message", "due_scheduled_message", "due_webhook_delivery"}

    text = run_postroom(service.env, "status").stdout
    for heading in ("processes (seen in the last hour)", "queues (ready / unacked / consumers)",
                    "oldest waiting", "messages in the last hour, by status", "stuck"):
        assert heading in text
    assert "scheduler  alive" in text and "inbound_reports_unparseable" in text


def test_a_webhook_delivery_failed_for_good_is_listed_and_replayed_to_the_receiver(service, tenant, receiver):
    hook = tenant.post("/webhooks/triggers", json={"targetUrl": receiver.url, "event": "contact.created"})
    assert hook.status_code == 201, hook.text
    hook = hook.json()["data"]
    receiver.trust(hook["id"], hook["secret"])
    receiver.fail_next(1, status=503)
    delivery_id = webhook_deliveries.on_last_attempt(service, tenant.workspace_id, hook["id"])

    listed = wait_until(lambda: [d for d in postroom_json(service, "webhooks", "failed", "--workspace",
                                                          tenant.workspace_id) if d["id"] == delivery_id],
                        timeout=30, what="the delivery failed for good")
    assert (listed[0]["attempt_count"], listed[0]["last_status_code"]) == (MAX_ATTEMPTS, 503)
    assert delivery_id in run_postroom(service.env, "webhooks", "failed", "--workspace", tenant.workspace_id).stdout
    assert postroom_json(service, "webhooks", "failed", "--workspace", service.tenant().workspace_id) == []

    text = run_postroom(service.env, "webhooks", "replay", delivery_id).stdout
    assert f"{delivery_id}: failed → pending (replay 1)" in text
    [accepted] = receiver.wait_for(lambda r: r.accepted("contact.created"), what="the replayed delivery")
    assert accepted.delivery_id == delivery_id and accepted.verified
    shown = wait_until(lambda: [d for d in tenant.get(f"/webhooks/{hook['id']}/deliveries").json()["data"]
                                if d["status"] == "delivered"], what="the delivery delivered")
    assert [a["status_code"] for a in shown[0]["attempts"]] == [503, 200]
    # replaying again: it is not failed any more
    assert "no failed delivery" in run_postroom(service.env, "webhooks", "replay", delivery_id, expect=1).stderr
    assert postroom_json(service, "webhooks", "replay", "--all-failed", "--workspace", tenant.workspace_id) == \
        {"replayed": [], "refused": []}


def test_messages_failed_lists_failures_with_their_reasons(service, tenant):
    message_id = failed_message(service, tenant, "template could not be rendered: unknown tag")
    rows = postroom_json(service, "messages", "failed", "--workspace", tenant.workspace_id, "--since", "1h")
    assert [(r["id"], r["reason"], r["to"]) for r in rows] == \
        [(message_id, "template could not be rendered: unknown tag", ["ann@example.com"])]
    assert postroom_json(service, "messages", "failed", "--workspace", tenant.workspace_id,
                         "--since", "2999-01-01T00:00:00Z") == []
    text = run_postroom(service.env, "messages", "failed", "--workspace", tenant.workspace_id).stdout
    assert message_id in text and "unknown tag" in text
    assert "--since" in run_postroom(service.env, "messages", "failed", "--since", "yesterday", expect=2).stderr
