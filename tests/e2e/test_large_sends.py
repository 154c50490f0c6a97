"""Send jobs are bounded by bytes, not only by count: a campaign of a ~200 KB template
goes out completely (100 such messages in one job would be a 30–40 MB AMQP message;
RabbitMQ 4 refuses anything over 16 MiB by default). And a send job the broker refuses
ends its messages `failed` with the reason, instead of a render loop for ever."""

from __future__ import annotations

import collections
import subprocess
import uuid

import pytest

from mongo import contacts
from tests.support.audience import make_list
from tests.support.campaigns import make_campaign, make_template, send, wait_campaign
from tests.support.polling import wait_status
from tests.support.private_stack import private_stack

RECIPIENTS = 150


def big_template_html(kilobytes: int = 200) -> str:
    paragraph = ("<p>Our spring catalogue, page {n}: tables, chairs, lamps and everything else you "
                 "asked us about this winter, {{first_name|friend}}.</p>\n")
    parts, size, n = [], 0, 0
    while size < kilobytes * 1024:
        part = paragraph.replace("{n}", str(n))
        parts.append(part)
        size += len(part)
        n += 1
    return "<html><body>" + "".join(parts) + "</body></html>"


@pytest.mark.slow
def test_a_campaign_of_a_200_kb_template_to_150_recipients_goes_out_completely(service, tenant):
    members = make_list(tenant, "Catalogue readers")
    addresses = [f"catalogue{i:03d}-{uuid.uuid4().hex[:6]}@example.org" for i in range(RECIPIENTS)]

    async def seed(db):
        await db.contacts.insert_many([contacts.new_document(tenant.workspace_id, email=a, lists=[members["id"]],
                                                             first_name=f"Reader {i}")
                                       for i, a in enumerate(addresses)])
    service.store.run(seed)
    html = big_template_html()
    assert 200 * 1024 <= len(html) <= 256 * 1024
    campaign = make_campaign(tenant, template_id=make_template(tenant, html=html)["id"], list_id=members["id"])
    assert send(tenant, campaign["id"]).json()["data"]["total_recipients"] == RECIPIENTS

    done = wait_campaign(tenant, campaign["id"], "sent", timeout=240)
    assert done["stats"]["delivered"] == RECIPIENTS and done["stats"]["pending"] == 0
    received = collections.Counter(r.lower() for a in addresses for m in service.smtp.messages_to(a)
                                   for r in m.rcpt_tos)
    assert received == collections.Counter({a.lower(): 1 for a in addresses})
    sample = service.smtp.messages_to(addresses[7])[0]
    assert len(sample.data) > 200 * 1024 and "Reader 7" in sample.body("html")


@pytest.fixture
def refusing_stack(service, store_url, run_dir):
    """The broker refuses every send job (a queue policy: no room, reject-publish), and the
    watchdog looks after a stalled message every 4 s, giving up after 2 hand-backs. Render
    and send run in separate pools, as an operator may run them: a worker serving both
    delivers what it rendered itself, and only holds and retries travel as send jobs.

    The policy is set once a first email has gone through: a worker still booting (its
    render processes start with it) on a loaded box would otherwise leave the message
    unrendered through every hand-back, and it would give up with no refusal to report."""
    env = {"POSTROOM_MESSAGE_STALL_SECONDS": "4", "POSTROOM_MESSAGE_MAX_REVIVALS": "2"}
    with private_stack(service, store_url, run_dir, "refused", env=env) as stack:
        stack.start_worker("renderer", queues="render")
        stack.start_worker("sender", queues="send")
        warm_up = f"warm-up-{uuid.uuid4().hex[:6]}@example.org"
        response = stack.tenant().post("/email/send", json={"to": warm_up, "subject": "First", "text": "x"})
        assert response.status_code == 202, response.text
        stack.smtp.wait_for(warm_up, timeout=90)
        subprocess.run(["rabbitmqctl", "set_policy", "-p", stack.vhost, "refuse-send", "^send$",
                        '{"max-length": 0, "overflow": "reject-publish"}', "--apply-to", "queues"],
                       check=True, capture_output=True)
        yield stack


@pytest.mark.slow
def test_a_send_job_the_broker_refuses_ends_failed_with_the_reason(refusing_stack):
    stack = refusing_stack
    tenant = stack.tenant()
    to = f"refused-{uuid.uuid4().hex[:6]}@example.org"
    response = tenant.post("/email/send", json={"to": to, "subject": "Hello", "text": "x"})
    assert response.status_code == 202, response.text
    view = wait_status(tenant, response.json()["data"]["message_id"], "failed", timeout=60)
    assert "gave up" in view["error"] and "the broker refused its send job" in view["error"]
    refusals = [h for h in view["history"] if h["status"] == "deferred"]
    assert refusals and all("refused" in h["detail"] for h in refusals)
    assert stack.smtp.messages_to(to) == []
