"""A failing run leaves no mail in the logs: no body, no recipient token, no secret.

A private stack whose SMTP relay is down at first (sends fail and are retried), a send job
that fails in the worker with whole rendered messages as its arguments (Dramatiq logs a
failed job by its arguments), and a second front whose broker is unreachable (every send
fails to enqueue). Then the relay comes up and the email is delivered, which shows what
its body and token were; neither appears in any process's log. Each failed enqueue is one
log line with its reason."""

from __future__ import annotations

import re
import time
import uuid

import pika
import pytest
from dramatiq.message import Message

from ops.embedded_store import free_port
from tests.support import services
from tests.support.api import assert_error
from tests.support.http_receiver import HttpReceiver
from tests.support.polling import wait_until as wait_for
from tests.support.private_stack import private_stack
from tests.support.smtp_sink import SmtpSink

FAILED_ENQUEUES = 3


@pytest.fixture
def relay_down_stack(service, store_url, run_dir):
    relay_port = free_port()  # nothing listens there until the test starts the relay
    with private_stack(service, store_url, run_dir, "nomail",
                       env={"POSTROOM_SMTP_URL": f"smtp://127.0.0.1:{relay_port}"}) as stack:
        stack.relay = SmtpSink(port=relay_port)
        try:
            yield stack
        finally:
            if stack.relay.controller.loop.is_running():
                stack.relay.stop()


def stored(stack, message_id):
    async def read(db):
        return await db.messages.find_one({"_id": message_id}, {"attempts": 1, "status": 1})
    return stack.store.run(read)


def wait_until(predicate, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def publish_failing_send_job(amqp_url: str, mime: str) -> Message:
    """A send job carrying a rendered message whose call fails in the worker (an argument the
    actor does not take), once (no retries)."""
    job = Message(queue_name="send", actor_name="send_messages",
                  args=([{"_id": "msg_" + uuid.uuid4().hex, "mail_from": "bounce@bounces.postroom.test",
                          "recipients": ["someone@nomail.example"], "data": mime}],),
                  kwargs={"unexpected_argument": 1}, options={"max_retries": 0})
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        channel = connection.channel()
        channel.queue_declare("send", durable=True, passive=True)
        channel.basic_publish("", "send", job.encode(), pika.BasicProperties(delivery_mode=2))
    finally:
        connection.close()
    return job


@pytest.mark.slow
def test_a_failing_run_logs_no_body_no_token_and_one_line_per_failed_enqueue(relay_down_stack):
    stack = relay_down_stack
    worker = stack.start_worker("worker")
    tenant = stack.tenant()
    marker = f"BODY-MARKER-{uuid.uuid4().hex}"
    address = f"nomail-{uuid.uuid4().hex[:8]}@nomail.example"
    accepted = tenant.post("/email/send", json={"to": address, "subject": "Private",
                                                "html": f"<p>Your code: {marker}</p>"})
    assert accepted.status_code == 202, accepted.text
    message_id = accepted.json()["data"]["message_id"]
    wait_until(lambda: (stored(stack, message_id) or {}).get("attempts", 0) >= 1,
               "the send did not fail against the unreachable relay")

    job = publish_failing_send_job(stack.env["POSTROOM_AMQP_URL"], f"Subject: x\r\n\r\n{marker}\r\n")
    wait_until(lambda: job.message_id in worker.log_path.read_text(errors="replace"),
               f"the failed job was not logged:\n{worker.tail()}")

    broker_down = {**stack.env, "POSTROOM_AMQP_URL": f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F"}
    with services.another_front("front-broker-down", broker_down, stack.log_dir, answers=(503,)) as base_url:
        front_log = stack.log_dir / "front-broker-down.log"
        lines_before = len(front_log.read_text().splitlines())
        client = stack.client(tenant.key)
        for _ in range(FAILED_ENQUEUES):
            refused = client.post(f"{base_url}/api/v1/email/send", json={
                "to": address, "subject": "Private", "html": f"<p>Your code: {marker}</p>"})
            assert_error(refused, 500, "schedule_failed")
        new_lines = [line for line in front_log.read_text().splitlines()[lines_before:]
                     if "postroom.access:" not in line]  # besides the one access line each
    assert len(new_lines) == FAILED_ENQUEUES, new_lines
    assert all(re.search(r"enqueue to render failed: \w+", line) for line in new_lines), new_lines

    stack.relay.start()
    [delivered] = stack.relay.wait_for(address, timeout=45)
    html = delivered.body("html")
    assert marker in html
    token = re.search(r'href="[^"]+/u/([^"]+)"', html).group(1)

    logs = {path.name: path.read_text(errors="replace") for path in stack.log_dir.glob("*.log")}
    assert {"front.log", "worker.log", "scheduler.log", "front-broker-down.log"} <= set(logs)
    for name, text in logs.items():
        assert marker not in text, f"the body marker is in {name}"
        assert token not in text, f"a recipient token is in {name}"
        assert stack.env["POSTROOM_SECRET_KEY"] not in text, f"the secret key is in {name}"


def test_a_webhook_delivery_logs_neither_the_urls_token_nor_a_password(service, store_url, run_dir):
    """A real delivery through the worker to a receiver on loopback whose URL carries a
    token in its query string: no process's log holds the token. A URL with a password
    cannot be subscribed at all (credentials are refused); ops' own log guard takes user
    info out of any line (tests/ops/test_logs.py)."""
    token, password = f"TOKEN{uuid.uuid4().hex}", f"PASS{uuid.uuid4().hex}"
    receiver = HttpReceiver().start()
    try:
        with private_stack(service, store_url, run_dir, "hooklogs", env={"POSTROOM_LOG_FORMAT": "json"}) as stack:
            stack.start_worker("worker")
            tenant = stack.tenant()
            with_password = receiver.url.replace("http://", f"http://hook:{password}@") + f"?token={token}"
            assert_error(tenant.post("/webhooks/triggers", json={"targetUrl": with_password,
                                                                 "event": "contact.created"}), 400,
                         "validation_error", "targetUrl")
            hook = tenant.post("/webhooks/triggers", json={"targetUrl": f"{receiver.url}?token={token}",
                                                           "event": "contact.created"})
            assert hook.status_code == 201, hook.text
            assert tenant.post("/contacts", json={"email": f"hook-{uuid.uuid4().hex[:8]}@example.org"}
                               ).status_code == 201
            receiver.wait_for(lambda r: r.accepted("contact.created"), timeout=60, what="the delivery")
            wait_for(lambda: [d for d in tenant.get(f"/webhooks/{hook.json()['data']['id']}/deliveries"
                                                    ).json()["data"] if d["status"] == "delivered"],
                     timeout=30, what="the delivery recorded as delivered")
            # the delivered request did carry the token: it is the log that must not
            assert any(token in r.path for r in receiver.received("contact.created"))
            logs = {path.name: path.read_text(errors="replace") for path in stack.log_dir.glob("*.log")}
    finally:
        receiver.stop()
    assert {"front.log", "worker.log", "scheduler.log"} <= set(logs)
    for name, text in logs.items():
        assert token not in text, f"the webhook URL's token is in {name}"
        assert password not in text, f"the refused URL's password is in {name}"
