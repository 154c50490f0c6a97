"""The worker advancing automation runs killed with SIGKILL while 500 runs are inside a
flow with an email step, then replaced.

A private stack (own RabbitMQ vhost, database, SMTP sink, front and scheduler) with two
workers: one for the `automations` queue alone — the one killed — and one for rendering and
sending, so what is measured is the engine's crash safety, not the send step's (whose own
crash test is test_campaign_crash.py). 500 contacts join a list; list_joined starts a
run for each: tag, email, update_attribute. The kill lands while runs are between steps.
Afterwards every run has completed, every contact received the email exactly once (none
twice: the message id is derived from run, step and visit; none skipped), and every
contact carries the tag and the attribute."""

from __future__ import annotations

import collections
import os
import signal
import time

import pytest

from mongo import contacts
from tests.support.audience import make_list
from tests.support.automations import make_automation
from tests.support.campaigns import make_template
from tests.support.polling import wait_until
from tests.support.private_stack import private_stack

# 500 runs: enough that the kill finds some done, some between steps and some not started
# (the engine does ~10 runs/s on the embedded store here, so 1,000 cost the suite 100 s)
CONTACTS = 500
KILL_AFTER_COMPLETED = 100
MAX_KILLS = 5


@pytest.fixture
def crash_stack(service, store_url, run_dir):
    with private_stack(service, store_url, run_dir, "autocrash") as stack:
        yield stack



def run_statuses(stack) -> collections.Counter:
    """Runs per status; `mid_flow`: active runs that have done a step and not the last."""
    async def read(db):
        return await db.automation_runs.find({}, {"status": 1, "history": 1}).to_list()
    found = stack.store.run(read)
    counts = collections.Counter(r["status"] for r in found)
    counts["mid_flow"] = sum(1 for r in found if r["status"] == "active" and r["history"])
    return +counts


def engine_busy(stack) -> bool:
    """At least KILL_AFTER_COMPLETED runs completed and some active with a step done (two
    counts, cheaper than reading the runs, so little passes between the look and the kill)."""
    async def counts(db):
        completed = await db.automation_runs.count_documents({"status": "completed"})
        # active less active with an empty history: nx-27017 matches `{"$ne": []}` on an
        # empty array too and `history.0: {$exists}` on nothing; `$size` it gets right
        active = await db.automation_runs.count_documents({"status": "active"})
        not_started = await db.automation_runs.count_documents({"status": "active", "history": {"$size": 0}})
        return completed, active - not_started
    completed, between = stack.store.run(counts)
    return completed >= KILL_AFTER_COMPLETED and between > 0


@pytest.mark.slow
def test_an_automation_worker_killed_mid_flow_loses_no_run_and_sends_no_email_twice(crash_stack):
    stack = crash_stack
    tenant = stack.tenant()
    members = make_list(tenant, "Joiners")
    template = make_template(tenant)
    make_automation(tenant, [
        {"id": "tag", "step_type": "tag", "config": {"tagName": "welcomed"}},
        {"id": "mail", "step_type": "email", "config": {"templateId": template["id"], "subject": "Welcome"}},
        {"id": "mark", "step_type": "update_attribute",
         "config": {"attributeName": "welcome", "attributeValue": "sent"}},
    ], trigger_type="list_joined", trigger_config={"list_id": members["id"]})
    addresses = [f"j{i:05d}@autocrash.example" for i in range(CONTACTS)]
    docs = [contacts.new_document(tenant.workspace_id, email=a) for a in addresses]

    async def seed(db):
        await db.contacts.insert_many(docs)
    stack.store.run(seed)
    stack.start_worker("sender", queues="render,send,webhooks,campaigns,bounces")
    first = stack.start_worker("engine-1", queues="automations")
    started = time.monotonic()
    for start in range(0, CONTACTS, 250):  # list.member_added for each: the trigger
        response = tenant.post(f"/lists/{members['id']}/members",
                               json={"contact_ids": [d["_id"] for d in docs[start:start + 250]]})
        assert response.json()["data"]["added"] == 250

    # The kill follows the first look that finds enough runs done and some between steps: the
    # scheduler starts runs in passes, and the engine can finish a pass's runs before the next
    # arrives, so a kill timed on the completed count alone can land with nobody mid-flow.
    # Even so the runs a look finds between steps can be done a few milliseconds later, at
    # the tail of a pass, and the kill then finds the engine idle: such a kill proves
    # nothing, so the engine is started again and killed at the next busy look (every kill
    # is one more crash the outcome below must survive).
    for kills in range(1, MAX_KILLS + 1):
        deadline = time.monotonic() + 120
        while not engine_busy(stack):
            assert time.monotonic() < deadline, first.tail()
            time.sleep(0.01)
        os.killpg(first.proc.pid, signal.SIGKILL)
        first.proc.wait()
        killed_after = time.monotonic() - started
        at_kill = run_statuses(stack)
        assert at_kill["completed"] < CONTACTS, "the kill must land mid-flow"
        if at_kill["mid_flow"] > 0:
            break
        assert kills < MAX_KILLS, f"none of {MAX_KILLS} kills found runs between steps"
        first = stack.start_worker(f"engine-1-again-{kills}", queues="automations")

    stack.start_worker("engine-2", queues="automations")
    wait_until(lambda: run_statuses(stack)["completed"] == CONTACTS, timeout=240, interval=0.5,
               what="every run completed")


    # the barrier for "nobody got a second copy": every message of the flow is final
    async def open_messages(db):
        return await db.messages.count_documents({"workspace_id": tenant.workspace_id,
                                                  "status": {"$in": ["queued", "sending"]}})
    wait_until(lambda: stack.store.run(open_messages) == 0 and sum(stack.smtp.recipient_counts().values()) >= CONTACTS,
               timeout=120, interval=0.5, what="every email sent")
    final = stack.smtp.recipient_counts()
    print(f"\nautomation crash test: runs={CONTACTS} completed_at_kill={at_kill['completed']} "
          f"active_at_kill={at_kill['active']} mid_flow_at_kill={at_kill['mid_flow']} kills={kills} "
          f"killed_after={killed_after:.1f}s "
          f"elapsed={time.monotonic() - started:.1f}s")

    assert run_statuses(stack) == {"completed": CONTACTS}
    assert [a for a in addresses if final[a] != 1] == [], "every contact received the email exactly once"

    async def marked(db):
        return await db.contacts.find({"workspace_id": tenant.workspace_id}, {"tags": 1, "attributes": 1}).to_list()
    people = stack.store.run(marked)
    assert all(len(p["tags"]) == 1 and p["attributes"] == {"welcome": "sent"} for p in people)

    async def message_count(db):
        return await db.messages.count_documents({"workspace_id": tenant.workspace_id})
    assert stack.store.run(message_count) == CONTACTS
