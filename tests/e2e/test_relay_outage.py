"""The next SMTP hop defers everything for longer than the old retry window (8 attempts,
about five minutes), then comes back: every message is delivered, exactly once.

A private stack whose SMTP retry waits are scaled down (POSTROOM_SEND_RETRY_SCALE, as
POSTROOM_WEBHOOK_RETRY_SCALE does for webhooks): the schedule's first waits ride the
broker, the later ones (5 min and up, unscaled) wait in the store and the scheduler
renders the message again when due — both paths are crossed before the relay returns."""

from __future__ import annotations

import collections
import uuid

import pytest

from tests.support.polling import wait_until
from tests.support.private_stack import private_stack

MESSAGES = 20
OLD_WINDOW_ATTEMPTS = 8  # the old schedule gave up after this many


@pytest.fixture
def outage_stack(service, store_url, run_dir):
    with private_stack(service, store_url, run_dir, "outage", env={"POSTROOM_SEND_RETRY_SCALE": "0.002"}) as stack:
        stack.start_worker("worker")
        yield stack


def messages_of(stack, ids):
    async def read(db):
        return await db.messages.find({"_id": {"$in": ids}}, {"status": 1, "attempts": 1, "history": 1,
                                                              "next_attempt_at": 1}).to_list()
    return stack.store.run(read)


@pytest.mark.slow
def test_a_relay_down_longer_than_the_old_retry_window_gets_every_message_once_when_it_returns(outage_stack):
    stack = outage_stack
    tenant = stack.tenant()
    stack.smtp.defer_everyone(True)
    addresses = [f"reader{i}-{uuid.uuid4().hex[:6]}@example.org" for i in range(MESSAGES)]
    response = tenant.post("/email/batch", json={"messages": [
        {"to": a, "subject": "Your receipt", "text": "Thanks"} for a in addresses]})
    assert response.status_code == 202, response.text
    ids = response.json()["data"]["message_ids"]

    waited_in_store = set()

    def past_the_old_window():
        docs = messages_of(stack, ids)
        waited_in_store.update(d["_id"] for d in docs if d.get("next_attempt_at"))
        assert all(d["status"] in ("queued", "sending") for d in docs), [d["status"] for d in docs]
        return all(int(d.get("attempts") or 0) > OLD_WINDOW_ATTEMPTS for d in docs)
    wait_until(past_the_old_window, timeout=90, what=f"more than {OLD_WINDOW_ATTEMPTS} attempts each",
               interval=0.2)
    assert waited_in_store == set(ids), "the long waits were held in the store"
    assert stack.smtp.handler.received == []

    stack.smtp.defer_everyone(False)
    wait_until(lambda: all(d["status"] == "delivered" for d in messages_of(stack, ids)), timeout=60,
               what="every message delivered", interval=0.2)
    barrier = f"barrier-{uuid.uuid4().hex[:6]}@example.org"
    tenant.post("/email/send", json={"to": barrier, "subject": "After", "text": "x"})
    stack.smtp.wait_for(barrier, timeout=30)

    counted = stack.smtp.message_ids()
    assert collections.Counter({m: counted[f"<{m}@postroom.test>"] for m in ids}) == \
        collections.Counter({m: 1 for m in ids})
    history = [h for h in messages_of(stack, ids[:1])[0]["history"]]
    deferrals = [h["detail"] for h in history if h["status"] == "deferred"]
    assert len(deferrals) > OLD_WINDOW_ATTEMPTS and deferrals[0].startswith("451 4.3.2")
    assert any("next attempt at" in d for d in deferrals)
