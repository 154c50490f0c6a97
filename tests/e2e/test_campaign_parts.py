"""Campaign parts end to end (mongo/campaign_parts.py): a part whose render job is lost is
handed to a new job by the scheduler once its lease runs out, and every recipient still
gets exactly one email; parts waiting for their job when the campaign is cancelled record
their recipients `cancelled` and send nothing.

A private stack each (own vhost, store database, SMTP sink, front and scheduler): a first
worker serves only the `campaigns` queue, so the fan-out stores the parts and publishes
their render jobs, which wait in the `render` queue until the test says otherwise."""

from __future__ import annotations

import collections
import shutil
import subprocess

import pytest

from tests.support.audience import make_list
from tests.support.campaigns import campaign_to_stored, send, wait_campaign
from tests.support.polling import wait_until
from tests.support.private_stack import SHORT_LEASE_ENV, private_stack

RECIPIENTS = 150  # one batch, two parts


@pytest.fixture
def parts_stack(service, store_url, run_dir):
    with private_stack(service, store_url, run_dir, "parts", env=SHORT_LEASE_ENV) as stack:
        yield stack


def render_jobs_waiting(vhost: str) -> int:
    out = subprocess.run([shutil.which("rabbitmqctl"), "-q", "list_queues", "-p", vhost, "name", "messages"],
                         capture_output=True, text=True, check=True).stdout
    return next((int(n) for name, n in (line.split() for line in out.splitlines() if line.strip())
                 if name == "render"), 0)


def fanned_out(stack, tenant, members) -> tuple[dict, list[str], list[dict]]:
    """A campaign to RECIPIENTS contacts, fanned out by a `campaigns`-only worker: its parts
    stored and their render jobs waiting in the broker."""
    addresses = [f"p{i:04d}@parts.example" for i in range(RECIPIENTS)]
    campaign = campaign_to_stored(stack, tenant, members["id"], addresses)
    stack.start_worker("fan-out", queues="campaigns")
    assert send(tenant, campaign["id"]).json()["data"]["total_recipients"] == RECIPIENTS

    def parts():
        async def read(db):
            found = await db.campaign_parts.find({"campaign_id": campaign["id"]}).to_list()
            done = await db.campaigns.find_one({"_id": campaign["id"]}, {"fanout_done": 1})
            return found if done and done["fanout_done"] else None
        return stack.store.run(read)
    stored = wait_until(parts, timeout=20, what="the campaign's parts stored")
    # at least: on a slow box a part's 8 s lease can lapse before this look, and the
    # scheduler then queues a second job for it (the part's claim keeps that harmless)
    wait_until(lambda: render_jobs_waiting(stack.vhost) >= len(stored), timeout=20,
               what="the parts' render jobs queued")
    return campaign, addresses, stored


@pytest.mark.slow
def test_a_part_whose_render_job_was_lost_is_sent_once_by_a_new_job(parts_stack):
    stack = parts_stack
    tenant = stack.tenant()
    campaign, addresses, stored = fanned_out(stack, tenant, make_list(tenant, "Everyone"))
    assert sorted(len(p["contact_ids"]) for p in stored) == [50, 100]
    # no message exists before a recipient's outcome
    assert stack.store.run(lambda db: db.messages.count_documents({"campaign_id": campaign["id"]})) == 0

    subprocess.run([shutil.which("rabbitmqctl"), "-q", "purge_queue", "-p", stack.vhost, "render"], check=True,
                   stdout=subprocess.DEVNULL)  # the jobs are lost
    # (no look at the queue here: a part whose lease lapsed meanwhile may already have a new
    # job; what the test holds to is below: each part revived, each recipient mailed once)
    stack.start_worker("render-send", queues="render,send")
    done = wait_campaign(tenant, campaign["id"], "sent", timeout=45)

    received = stack.smtp.recipient_counts()
    assert sorted(received) == addresses and set(received.values()) == {1}
    assert done["stats"]["delivered"] == RECIPIENTS and done["stats"]["pending"] == 0
    revived = stack.store.run(lambda db: db.campaign_parts.find({"campaign_id": campaign["id"]}).to_list())
    assert all(p["done"] and p["revivals"] >= 1 for p in revived)


@pytest.mark.slow
def test_parts_waiting_when_their_campaign_is_cancelled_record_their_recipients_cancelled(parts_stack):
    stack = parts_stack
    tenant = stack.tenant()
    campaign, addresses, stored = fanned_out(stack, tenant, make_list(tenant, "Everyone"))
    cancelled = tenant.post(f"/campaigns/{campaign['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    stack.start_worker("render-send", queues="render,send")

    def recorded():
        async def read(db):
            return await db.messages.find({"campaign_id": campaign["id"]}, {"status": 1}).to_list()
        docs = stack.store.run(read)
        return docs if len(docs) == RECIPIENTS else None
    docs = wait_until(recorded, timeout=30, what="every recipient recorded")
    assert {d["status"] for d in docs} == {"cancelled"}
    # the parts end done (the campaign is not waited on; a part is marked done just after
    # its recipients are recorded, so that may land a moment later), and nothing reached
    # the sink
    def parts_done():
        parts = stack.store.run(lambda db: db.campaign_parts.find({"campaign_id": campaign["id"]}).to_list())
        return parts if len(parts) == len(stored) and all(p["done"] for p in parts) else None
    wait_until(parts_done, timeout=30, what="every part done")
    assert stack.smtp.recipient_counts() == collections.Counter()
    stats = wait_until(lambda: (lambda s: s if s["cancelled"] == RECIPIENTS else None)(
        tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["stats"]), timeout=20, what="stats refreshed")
    assert stats["pending"] == 0 and stats["sent"] == 0
