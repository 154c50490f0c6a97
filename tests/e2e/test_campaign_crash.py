"""A campaign worker killed with SIGKILL in the middle of sending, then replaced.

A private stack (own RabbitMQ vhost, database, SMTP sink, front, scheduler and one
dedicated worker) so the killed worker is the only consumer. The sink counts what each
recipient received. At the kill we note who had received the email and who was
recorded as sent. After a new worker finishes the campaign: everyone got at least one
email, and the only recipients with a second copy are ones whose first was accepted by
SMTP but not yet recorded when the worker died (in flight in the killed process): the
replacement worker, which sends under a lease it never outlives, adds no duplicate."""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pipelines.campaigns.fanout import message_id
from tests.support.audience import make_list
from tests.support.campaigns import campaign_to_stored, send, wait_campaign
from tests.support.polling import wait_until
from tests.support.private_stack import SHORT_LEASE_ENV, private_stack

RECIPIENTS = 1000
KILL_AFTER_RECEIVED = 250


@pytest.fixture
def crash_stack(service, store_url, run_dir):
    with private_stack(service, store_url, run_dir, "crash", env=SHORT_LEASE_ENV) as stack:
        yield stack


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (a zombie holds no socket)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except OSError:
            continue
        if int(group) == pgid and state != "Z":
            return True
    return False


def statuses(stack, campaign_id):
    async def read(db):
        return await db.messages.find({"campaign_id": campaign_id}, {"status": 1, "to": 1, "lease_token": 1}).to_list()
    return stack.store.run(read)


def unrecorded_in_open_parts(stack, campaign_id) -> int:
    """Recipients of campaign parts not done (held by a part's job) with no message yet."""
    async def read(db):
        parts = await db.campaign_parts.find({"campaign_id": campaign_id, "done": False}).to_list()
        ids = [message_id(campaign_id, c) for p in parts for c in p["contact_ids"]]
        recorded = await db.messages.find({"_id": {"$in": ids}}, {"_id": 1}).to_list()
        return len(ids) - len(recorded)
    return stack.store.run(read)


def where_it_stands(stack, campaign_id) -> str:
    """The campaign's messages by status and its open parts, for a failure's message."""
    async def read(db):
        by_status = collections.Counter(d["status"] for d in await db.messages.find(
            {"campaign_id": campaign_id}, {"status": 1}).to_list())
        parts = await db.campaign_parts.find({"campaign_id": campaign_id, "done": False},
                                             {"contact_ids": 0}).to_list()
        campaign = await db.campaigns.find_one({"_id": campaign_id})
        return f"messages {dict(by_status)}\nopen parts {parts}\ncampaign {campaign}"
    queues = subprocess.run([shutil.which("rabbitmqctl"), "-q", "list_queues", "-p", stack.vhost, "name", "messages",
                             "messages_unacknowledged", "consumers"], capture_output=True, text=True).stdout
    return f"{stack.store.run(read)}\nqueues:\n{queues}"


@pytest.mark.slow
def test_a_worker_killed_mid_campaign_loses_nobody_and_duplicates_only_what_was_in_flight(crash_stack):
    stack = crash_stack
    tenant = stack.tenant()
    members = make_list(tenant, "Everyone")
    addresses = [f"r{i:05d}@crash.example" for i in range(RECIPIENTS)]
    campaign = campaign_to_stored(stack, tenant, members["id"], addresses)
    first = stack.start_worker("worker-1")
    started = time.monotonic()
    assert send(tenant, campaign["id"]).json()["data"]["total_recipients"] == RECIPIENTS

    # a bound on a hang, not on speed: five stacks sending at once on two cores took over 40 s
    deadline = time.monotonic() + 120
    while sum(stack.smtp.recipient_counts().values()) < KILL_AFTER_RECEIVED:
        assert time.monotonic() < deadline, first.tail()
        time.sleep(0.02)
    killed_after = time.monotonic() - started
    os.killpg(first.proc.pid, signal.SIGKILL)
    first.proc.wait()
    # The killed processes are gone and the sink has no session open: what they had sent was
    # taken in or dropped with its connection, and no other worker runs, so nothing more arrives.
    wait_until(lambda: not group_alive(first.proc.pid) and stack.smtp.open_sessions() == 0, timeout=30,
               what="the killed worker's SMTP sessions closed")
    at_kill = stack.smtp.recipient_counts()
    docs = statuses(stack, campaign["id"])
    recorded = {d["to"][0].lower() for d in docs if d["status"] in ("sent", "delivered")}
    # held by a job: in a campaign part not done and not recorded yet (mongo/campaign_parts.py),
    # claimed (`sending`), or queued under a job's claim (pipelines.messages.delivery_status.born_claim)
    in_flight = unrecorded_in_open_parts(stack, campaign["id"]) + sum(
        1 for d in docs if d["status"] == "sending" or (d["status"] == "queued" and d.get("lease_token")))

    # The kill must land mid-campaign, or the assertions below hold vacuously.
    assert 0 < len(at_kill) < RECIPIENTS, f"received by {len(at_kill)} of {RECIPIENTS} at the kill"
    assert len(recorded) < RECIPIENTS, "the campaign was not finished at the kill"
    assert in_flight > 0, "messages were claimed but not recorded as sent at the kill"

    second = stack.start_worker("worker-2")
    # a restarted pool on a loaded box may take a while; the bound asserted is on duplicates, not speed
    try:
        done = wait_campaign(tenant, campaign["id"], "sent", timeout=120)
    except AssertionError as stuck:  # seen on a loaded box: keep what the processes and the store said
        raise AssertionError(f"{stuck}\n--- worker-2:\n{second.tail()}\n--- scheduler:\n{stack.scheduler.tail()}"
                             f"\n--- store and broker:\n{where_it_stands(stack, campaign['id'])}") from None
    final = stack.smtp.recipient_counts()
    duplicates = sum(n - 1 for n in final.values() if n > 1)
    elapsed = time.monotonic() - started
    print(f"\ncrash test: recipients={RECIPIENTS} received_at_kill={sum(at_kill.values())} "
          f"recorded_sent_at_kill={len(recorded)} accepted_unrecorded_at_kill={len(set(at_kill) - recorded)} "
          f"claimed_at_kill={in_flight} duplicates={duplicates} "
          f"killed_after={killed_after:.1f}s elapsed={elapsed:.1f}s")

    assert [a for a in addresses if final[a] < 1] == [], "every recipient received the campaign"
    assert [a for a in recorded if final[a] != 1] == [], "nobody recorded as sent got a second copy"
    accepted_unrecorded = set(at_kill) - recorded
    duplicated = {a for a, n in final.items() if n > 1}
    assert duplicated <= accepted_unrecorded, sorted(duplicated - accepted_unrecorded)[:5]
    assert max(final.values()) <= 2 and duplicates <= in_flight
    assert done["stats"]["delivered"] == RECIPIENTS and done["stats"]["pending"] == 0
