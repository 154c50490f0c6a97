"""A deploy stops the worker pool in the middle of a campaign and a batch of
transactional mail: a routine stop, not a fault.

A private stack (own RabbitMQ vhost, database, SMTP sink that answers each message
slowly, front, scheduler and one worker pool started by the test). The pool is stopped
while mail is going out, then a new pool finishes the work. What a user and an operator
check afterwards:

- SIGTERM to the pool (`systemctl stop`): every recipient got exactly one copy, and
  every delivered message has its `email.sent` and `email.delivered` events;
- SIGKILL to the pool's supervisor (its children notice and stop the same way): nobody
  is lost, and a second copy can only go to a recipient whose SMTP transaction was in
  flight when the stop came (accepted by the sink, not yet recorded) — the bound the
  docs/guarantees.md states."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from tests.e2e.test_campaign_crash import group_alive
from tests.support.audience import make_list
from tests.support.campaigns import campaign_to_stored, send, wait_campaign
from tests.support.http_receiver import HttpReceiver
from tests.support.polling import wait_until
from tests.support.private_stack import private_stack

RECIPIENTS = 1000
TRANSACTIONAL = 100
STOP_AFTER_RECEIVED = 250
DOMAIN = "deploy.example"
SINK_SECONDS_A_MESSAGE = 0.05   # slow enough that the stop lands mid-send
EVENTS = ("email.sent", "email.delivered")


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


@pytest.fixture
def deploy_stack(service, store_url, run_dir):
    with private_stack(service, store_url, run_dir, "deploy") as stack:
        stack.smtp.slow_down(DOMAIN, SINK_SECONDS_A_MESSAGE)
        yield stack


def _start_sending(stack, receiver):
    """A campaign to RECIPIENTS stored contacts and a batch of TRANSACTIONAL single emails,
    with a subscription to the per-message events; returns (tenant, campaign, batch ids)."""
    tenant = stack.tenant()
    hook = tenant.post("/webhooks", json={"url": receiver.url, "events": list(EVENTS)})
    assert hook.status_code == 201, hook.text
    members = make_list(tenant, "Everyone")
    campaign = campaign_to_stored(stack, tenant, members["id"],
                                  [f"c{i:05d}@{DOMAIN}" for i in range(RECIPIENTS)])
    stack.pool = stack.start_worker("pool-1")
    assert send(tenant, campaign["id"]).json()["data"]["total_recipients"] == RECIPIENTS
    batch = tenant.post("/email/batch", json={"messages": [
        {"to": f"t{i:04d}@{DOMAIN}", "subject": "Your receipt", "text": "Thanks"} for i in range(TRANSACTIONAL)]},
        headers={"Idempotency-Key": uuid.uuid4().hex})
    assert batch.status_code == 202, batch.text
    return tenant, campaign


def _wait_mid_send(stack) -> None:
    deadline = time.monotonic() + 60
    while sum(stack.smtp.recipient_counts().values()) < STOP_AFTER_RECEIVED:
        assert time.monotonic() < deadline and stack.pool.alive(), stack.pool.tail()
        time.sleep(0.02)


def _recorded(stack, workspace_id) -> dict[str, str]:
    """Recipient → status of every message of the workspace."""
    async def read(db):
        return await db.messages.find({"workspace_id": workspace_id}, {"to": 1, "status": 1}).to_list()
    return {d["to"][0].lower(): d["status"] for d in stack.store.run(read)}


def _finish(stack, tenant, campaign) -> dict[str, int]:
    stack.start_worker("pool-2")
    wait_campaign(tenant, campaign["id"], "sent", timeout=90)
    expected = RECIPIENTS + TRANSACTIONAL
    wait_until(lambda: list(_recorded(stack, tenant.workspace_id).values()).count("delivered") == expected,
               timeout=90, what="every message delivered")
    return stack.smtp.recipient_counts()


def _messages_without_their_events(stack, workspace_id) -> list[str]:
    async def read(db):
        delivered = await db.messages.find({"workspace_id": workspace_id, "status": "delivered"},
                                           {"_id": 1}).to_list()
        wanted = [f"{m['_id']}:{e}" for m in delivered for e in EVENTS]
        stored = {e["_id"] for e in await db.outbox.find({"_id": {"$in": wanted}}, {"_id": 1}).to_list()}
        return sorted(set(wanted) - stored)
    return stack.store.run(read)


@pytest.mark.slow
def test_sigterm_to_the_pool_mid_campaign_sends_every_recipient_exactly_once_with_its_events(
        deploy_stack, receiver):
    stack = deploy_stack
    tenant, campaign = _start_sending(stack, receiver)
    _wait_mid_send(stack)

    stopped_at = time.monotonic()
    stack.pool.proc.send_signal(signal.SIGTERM)
    stack.pool.proc.wait(timeout=80)
    stop_seconds = time.monotonic() - stopped_at
    wait_until(lambda: not group_alive(stack.pool.proc.pid), timeout=30, what="the pool's children gone")
    at_stop = stack.smtp.recipient_counts()
    assert 0 < len(at_stop) < RECIPIENTS + TRANSACTIONAL, "the stop must land mid-send"
    recorded = _recorded(stack, tenant.workspace_id)
    accepted_unrecorded = [a for a in at_stop if recorded.get(a) not in ("sent", "delivered")]
    assert accepted_unrecorded == [], "a stopped pool records everything it sent before it exits"

    final = _finish(stack, tenant, campaign)
    twice = sorted(a for a, n in final.items() if n > 1)
    print(f"\ndeploy stop: received_at_stop={sum(at_stop.values())} stop_took={stop_seconds:.1f}s "
          f"duplicates={len(twice)}")
    assert len(final) == RECIPIENTS + TRANSACTIONAL, "every recipient received their mail"
    assert twice == [], f"{len(twice)} recipients got a second copy, e.g. {twice[:5]}"
    assert _messages_without_their_events(stack, tenant.workspace_id) == []


@pytest.mark.slow
def test_a_pool_supervisor_killed_mid_campaign_duplicates_only_what_was_in_flight(deploy_stack, receiver):
    stack = deploy_stack
    tenant, campaign = _start_sending(stack, receiver)
    _wait_mid_send(stack)

    os.kill(stack.pool.proc.pid, signal.SIGKILL)   # the supervisor alone: its children are orphaned
    stack.pool.proc.wait()
    wait_until(lambda: not group_alive(stack.pool.proc.pid) and stack.smtp.open_sessions() == 0, timeout=80,
               what="the orphaned workers stopped and their SMTP sessions closed")
    at_stop = stack.smtp.recipient_counts()
    assert 0 < len(at_stop) < RECIPIENTS + TRANSACTIONAL, "the stop must land mid-send"
    recorded = _recorded(stack, tenant.workspace_id)
    in_flight = {a for a in at_stop if recorded.get(a) not in ("sent", "delivered")}

    final = _finish(stack, tenant, campaign)
    twice = {a for a, n in final.items() if n > 1}
    print(f"\nsupervisor kill: received_at_stop={sum(at_stop.values())} in_flight={len(in_flight)} "
          f"duplicates={len(twice)}")
    assert len(final) == RECIPIENTS + TRANSACTIONAL, "every recipient received their mail"
    assert twice <= in_flight, sorted(twice - in_flight)[:5]
    assert max(final.values()) <= 2
    assert _messages_without_their_events(stack, tenant.workspace_id) == []
