"""Chaos while mail flows: RabbitMQ is restarted and a worker is killed with SIGKILL in the
middle of a few hundred sends; every message is counted at the SMTP sink.

Promises checked: no email whose request was answered 2xx is lost; none whose request was
answered 5xx ("nothing will be sent") is sent; a second copy happens only to messages that
were in SMTP flight in the killed worker (held by one of its jobs: claimed, `sending`,
or queued under the born claim it was stored with).

A private RabbitMQ node (its own node name, ports and data under the test's temp dir; the
shared broker on 5672 is never touched), a private stack on it, and two worker pools. The
send lease is short (8 s) so the killed worker's claims return quickly, and the watchdog
picks up in 15 s what the broker outage stranded (a render whose send job could not be
published)."""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
import uuid

import httpx
import pytest

from tests.support.faults import PrivateRabbitmq
from tests.support.private_stack import private_stack

MESSAGES = 300
SEND_RATE_PER_SECOND = 10
BROKER_RESTART_AFTER = 60  # answered requests
WORKER_KILL_AFTER = 180
DELIVERY_TIMEOUT_SECONDS = 60


@pytest.fixture
def chaos_stack(service, store_url, run_dir):
    rabbit = PrivateRabbitmq(run_dir / f"rabbit-{uuid.uuid4().hex[:6]}").start()
    env = {"POSTROOM_AMQP_URL": rabbit.url, "POSTROOM_SEND_LEASE_SECONDS": "8",
           "POSTROOM_SMTP_TIMEOUT_SECONDS": "2", "POSTROOM_MESSAGE_STALL_SECONDS": "15"}
    try:
        with private_stack(service, store_url, run_dir, "chaos", env=env) as stack:
            stack.rabbit = rabbit
            yield stack
    finally:
        rabbit.close()


class Sender(threading.Thread):
    """Sends MESSAGES emails at a steady rate, each to its own address, and keeps every answer."""

    def __init__(self, base_url: str, key: str):
        super().__init__(daemon=True)
        self.client = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        self.answers: dict[str, int | None] = {}  # address -> status (None: no answer)

    def run(self):
        started = time.monotonic()
        for i in range(MESSAGES):
            time.sleep(max(0.0, started + i / SEND_RATE_PER_SECOND - time.monotonic()))
            address = f"c{i:04d}@chaos.example"
            try:
                status = self.client.post("/email/send", json={
                    "to": address, "subject": f"Chaos {i}", "text": "counted at the sink"}).status_code
            except httpx.HTTPError:
                status = None
            self.answers[address] = status
        self.client.close()

    def wait_answered(self, count: int, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while len(self.answers) < count:
            assert time.monotonic() < deadline, f"{len(self.answers)} of {count} requests answered"
            time.sleep(0.05)


def received(sink) -> collections.Counter:
    with sink.handler.lock:
        return collections.Counter(r.lower() for m in sink.handler.received for r in m.rcpt_tos)


def claimed_now(stack, workspace_id) -> int:
    """Messages a job holds: claimed (`sending`), or still queued under the born claim of
    the render job published with them (pipelines.messages.delivery_status.born_claim)."""
    async def count(db):
        held = await db.messages.find({"workspace_id": workspace_id, "status": {"$in": ["queued", "sending"]}},
                                       {"status": 1, "lease_token": 1}).to_list()
        return sum(1 for m in held if m["status"] == "sending" or m.get("lease_token"))
    return stack.store.run(count)


@pytest.mark.slow
def test_broker_restart_and_a_killed_worker_lose_nothing_accepted(chaos_stack):
    stack = chaos_stack
    tenant = stack.tenant()
    stack.smtp.slow_down("chaos.example", 0.3)  # so some mail is in SMTP flight at the kill
    doomed = stack.start_worker("worker-a")
    stack.start_worker("worker-b")
    started = time.monotonic()
    sender = Sender(stack.api, tenant.key)
    sender.start()

    sender.wait_answered(BROKER_RESTART_AFTER)
    stack.rabbit.stop()
    stack.rabbit.start()
    restarted_at = time.monotonic() - started

    sender.wait_answered(WORKER_KILL_AFTER)
    deadline = time.monotonic() + 15  # kill while mail is being sent, not between two messages
    while claimed_now(stack, tenant.workspace_id) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(doomed.proc.pid, signal.SIGKILL)  # the pool and its children, as a lost machine
    doomed.proc.wait()
    in_flight = claimed_now(stack, tenant.workspace_id)
    killed_at = time.monotonic() - started

    sender.join(timeout=120)
    accepted = {a for a, status in sender.answers.items() if status is not None and 200 <= status < 300}
    refused = {a for a, status in sender.answers.items() if status is not None and status >= 500}
    deadline = time.monotonic() + DELIVERY_TIMEOUT_SECONDS
    while not accepted <= set(received(stack.smtp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    counts = received(stack.smtp)
    lost = accepted - set(counts)
    duplicates = sum(n - 1 for n in counts.values() if n > 1)
    print(f"\nchaos: sent={MESSAGES} accepted={len(accepted)} refused={len(refused)} "
          f"unanswered={MESSAGES - len(accepted) - len(refused)} delivered={len(set(counts))} lost={len(lost)} "
          f"duplicates={duplicates} in_flight_at_kill={in_flight} broker_back_at={restarted_at:.1f}s "
          f"killed_at={killed_at:.1f}s elapsed={time.monotonic() - started:.1f}s")

    assert refused, "the broker restart must land while requests are being answered"
    assert len(accepted) > MESSAGES // 2
    assert lost == set(), sorted(lost)[:10]
    assert set(counts) & refused == set(), "a request answered 5xx (nothing will be sent) was sent"
    assert duplicates <= in_flight
