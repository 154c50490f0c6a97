"""Fair turns on the `webhooks` queue (docs/webhooks.md): one workspace's
backlog behind a slow endpoint, or one slow endpoint of a workspace, never holds another
subscription's events. Real front, scheduler, worker pool and RabbitMQ; the receivers are
real HTTP servers on loopback, the slow ones answering each request after a delay.

A's backlog is written straight into the store through mongo/webhooks (what the
scheduler's dispatch writes for 20,000 events), so the test spends its time on delivery,
not on creating 20,000 contacts; every attempt still goes the real way (lane turns on
RabbitMQ, signed POSTs)."""

import time
import uuid

import pytest

from mongo import webhooks as webhook_store
from pipelines.core.clock import now_iso
from pipelines.webhooks.events import plan_deliveries
from tests.support.http_receiver import HttpReceiver, subscribe
from tests.support.polling import wait_until
from tests.support.services import run_postroom

BACKLOG = 20_000
INSERT_CHUNK = 2_000
# What "never held" means here: an unrelated event reaches its receiver within this.
FAIR_WITHIN_SECONDS = 5.0


@pytest.fixture
def receivers():
    started = []

    def start(delay_seconds: float = 0.0) -> HttpReceiver:
        server = HttpReceiver().start()
        server.delay_seconds = delay_seconds
        started.append(server)
        return server
    yield start
    for server in started:
        server.stop()


def backlog(service, tenant, hook, count: int) -> None:
    """`count` pending deliveries on `hook`, due now, as dispatch would have made them."""
    subscription = service.store.run(webhook_store.get, tenant.workspace_id, hook["id"])
    created = now_iso()  # after the subscription: it receives only events made after it was
    for start in range(0, count, INSERT_CHUNK):
        events = [{"_id": f"bulk-{uuid.uuid4().hex}", "workspace_id": tenant.workspace_id, "event": "contact.created",
                   "data": {"contact": {"id": f"c-{n}"}}, "timestamp": created}
                  for n in range(start, min(count, start + INSERT_CHUNK))]
        now = now_iso()
        service.store.run(webhook_store.insert_deliveries,
                          [d for e in events for d in plan_deliveries(e, [subscription], now)])


def pending(service, hook, at_least: int) -> bool:
    """Whether at least `at_least` deliveries still wait in the hook's lane."""
    return len(service.store.run(lambda db: db.webhook_deliveries.find(
        {"lane_due": {"$gte": f"{hook['id']}~", "$lt": f"{hook['id']}~~"}}, {"_id": 1},
        skip=max(0, at_least - 1), limit=1).to_list())) == 1


def event_reaches(tenant, receiver, *, email: str) -> float:
    """Create a contact (its `contact.created` event goes through the outbox, the
    scheduler and a lane turn); seconds until the receiver had it."""
    started = time.time()
    response = tenant.post("/contacts", json={"email": email})
    assert response.status_code == 201, response.text
    contact_id = response.json()["data"]["id"]
    [got] = receiver.wait_for(
        lambda r: [x for x in r.accepted("contact.created") if x.json["data"]["contact"]["id"] == contact_id],
        timeout=60, what="the unrelated event")
    assert got.verified
    return got.at - started


def test_a_workspace_with_20000_deliveries_to_a_slow_endpoint_does_not_hold_another_workspace(
        service, receivers):
    slow, fast = receivers(delay_seconds=1.0), receivers()
    busy, other = service.tenant(), service.tenant()
    busy_hook = subscribe(busy, slow)
    backlog(service, busy, busy_hook, BACKLOG)
    slow.wait_for(lambda r: len(r.received()) >= 8, timeout=60, what="the backlog draining")
    subscribe(other, fast)
    try:
        waited = event_reaches(other, fast, email="fair-b@example.org")
        assert waited < FAIR_WITHIN_SECONDS, f"B's event took {waited:.1f} s behind A's backlog"
        assert pending(service, busy_hook, BACKLOG - 1_000)  # A's backlog was (mostly) still ahead of it
        # the scheduler keeps its beat while the backlog drains (its webhook jobs are indexed and bounded)
        assert "scheduler  alive" in run_postroom(service.env, "status").stdout
        assert all(r.verified for r in slow.received())
    finally:  # the rest of A's backlog is cancelled, not left to the session's worker
        assert busy.delete(f"/webhooks/{busy_hook['id']}").status_code == 200
    wait_until(lambda: not pending(service, busy_hook, 1), timeout=120, what="A's backlog cancelled")


def test_a_slow_endpoint_of_a_workspace_does_not_hold_its_other_endpoint(service, receivers):
    slow, fast = receivers(delay_seconds=2.0), receivers()
    tenant = service.tenant()
    slow_hook, fast_hook = subscribe(tenant, slow), subscribe(tenant, fast)
    backlog(service, tenant, slow_hook, 500)
    slow.wait_for(lambda r: len(r.received()) >= 8, timeout=60, what="the slow endpoint's turn")
    try:
        waited = event_reaches(tenant, fast, email="fair-same@example.org")
        assert waited < FAIR_WITHIN_SECONDS, f"the other endpoint's event took {waited:.1f} s"
        assert pending(service, slow_hook, 400)  # the slow endpoint still had its backlog
        [delivered] = wait_until(lambda: [d for d in tenant.get(f"/webhooks/{fast_hook['id']}/deliveries")
                                          .json()["data"] if d["status"] == "delivered"],
                                 what="the fast endpoint's delivery logged")
        assert delivered["attempt_count"] == 1
    finally:
        assert tenant.delete(f"/webhooks/{slow_hook['id']}").status_code == 200
