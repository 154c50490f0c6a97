"""The store goes away: clients get fast, honest answers, and what they are told agrees
with what happens to their email.

- A private store process, killed with SIGKILL: API requests and /health answer 503
  `service_unavailable` with Retry-After within 2 s (not a long hang, not a 500), and 2xx
  again once the store is back.
- A front behind a proxy that loses the answer to a message insert the store applied: the
  front looks at what landed before answering. If the store answers that look, the email
  is accepted (202) and sent once; if it does not, the answer is 503 naming the message, and
  a retry with the same Idempotency-Key gets that same message, sent once."""

from __future__ import annotations

import re
import time
import uuid

import httpx
import pytest

from tests.support import services
from tests.support.api import assert_error
from tests.support.faults import PrivateStore, StoreProxy
from tests.support.private_stack import private_stack

UNAVAILABLE_WITHIN_SECONDS = 2.0


@pytest.fixture
def outage_stack(service, run_dir):
    store = PrivateStore(run_dir / f"outage-store-{uuid.uuid4().hex[:6]}").start()
    try:
        with private_stack(service, store.url, run_dir, "outage", env={"POSTROOM_MONGODB_URL": store.url}) as stack:
            stack.private_store = store
            yield stack
    finally:
        store.stop()


def timed(call):
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def assert_unavailable(response, elapsed):
    assert response.status_code == 503, response.text
    assert elapsed < UNAVAILABLE_WITHIN_SECONDS, f"answered after {elapsed:.2f} s"
    assert int(response.headers["Retry-After"]) > 0


@pytest.mark.slow
def test_with_the_store_down_requests_and_health_answer_503_with_retry_after_and_recover(outage_stack):
    stack = outage_stack
    tenant = stack.tenant()
    assert tenant.get("/contacts").status_code == 200

    stack.private_store.kill()

    listing, elapsed = timed(lambda: tenant.get("/contacts"))
    assert_unavailable(listing, elapsed)
    assert listing.json()["error"]["code"] == "service_unavailable"
    sending, elapsed = timed(lambda: tenant.post("/email/send", json={
        "to": "bob@outage.example", "subject": "Hi", "text": "Hello"}))
    assert_unavailable(sending, elapsed)
    assert sending.json()["error"]["code"] == "service_unavailable"
    health, elapsed = timed(lambda: httpx.get(f"{stack.api}/health", timeout=10))
    assert_unavailable(health, elapsed)
    assert health.json()["data"]["store"] == "unreachable"

    stack.private_store.start()
    deadline = time.monotonic() + 30
    while tenant.get("/contacts").status_code != 200:
        assert time.monotonic() < deadline, "the front did not recover after the store came back"
        time.sleep(0.2)
    assert httpx.get(f"{stack.api}/health", timeout=10).status_code == 200
    created = tenant.post("/contacts", json={"email": "after@outage.example"})
    assert created.status_code == 201


@pytest.fixture
def proxied_front(service, store_url):
    """A second front of the session's service whose store connection runs through a proxy."""
    proxy = StoreProxy(store_url)
    env = {**service.env, "POSTROOM_MONGODB_URL": proxy.url}
    try:
        with services.another_front(f"front-proxied-{uuid.uuid4().hex[:6]}", env, service.log_dir) as base_url:
            yield proxy, base_url
    finally:
        proxy.close()


def message_status(service, message_id):
    async def read(db):
        return await db.messages.find_one({"_id": message_id}, {"status": 1})
    return service.store.run(read)


def wait_sent(service, message_id, timeout=30):
    deadline = time.monotonic() + timeout
    while (doc := message_status(service, message_id)) is None or doc["status"] not in ("sent", "delivered"):
        assert time.monotonic() < deadline, doc
        time.sleep(0.1)


def test_an_insert_whose_answer_is_lost_is_found_and_sent_once(service, proxied_front):
    proxy, base_url = proxied_front
    tenant = service.tenant()
    address = f"lost-answer-{uuid.uuid4().hex[:8]}@example.org"
    proxy.lose_next_reply("messages")

    with httpx.Client(base_url=f"{base_url}/api/v1", headers={"Authorization": f"Bearer {tenant.key}"},
                      timeout=30) as client:
        answer = client.post("/email/send", json={"to": address, "subject": "Once", "text": "once"})

    assert proxy.lost_replies == 1, "the fault did not happen"
    assert answer.status_code == 202, answer.text
    message_id = answer.json()["data"]["message_id"]
    wait_sent(service, message_id)
    assert len(service.smtp.messages_to(address)) == 1


def test_an_unknown_outcome_answers_503_and_a_retry_with_the_key_gets_the_same_message(service, proxied_front):
    proxy, base_url = proxied_front
    tenant = service.tenant()
    address = f"unknown-outcome-{uuid.uuid4().hex[:8]}@example.org"
    body = {"to": address, "subject": "Once", "text": "once"}
    headers = {"Authorization": f"Bearer {tenant.key}", "Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    proxy.lose_next_reply("messages", then_refuse=True)  # and the store stays out of reach

    with httpx.Client(base_url=f"{base_url}/api/v1", headers=headers, timeout=30) as client:
        first = client.post("/email/send", json=body)
        assert proxy.lost_replies == 1, "the fault did not happen"
        assert_error(first, 503, "service_unavailable")
        assert int(first.headers["Retry-After"]) > 0
        named = re.search(r"msg_[0-9a-f]+", first.json()["error"]["message"]).group(0)
        assert message_status(service, named)["status"] == "queued"  # it had landed

        proxy.heal()
        deadline = time.monotonic() + 30
        while (retry := client.post("/email/send", json=body)).status_code in (409, 503):
            assert time.monotonic() < deadline, retry.text  # 409: the first claim is being released
            time.sleep(0.25)  # polling the retry, not waiting for nothing to happen

    assert retry.status_code == 202, retry.text
    assert retry.json()["data"]["message_id"] == named
    wait_sent(service, named)
    assert len(service.smtp.messages_to(address)) == 1
