"""Prometheus endpoints of every process, scraped after real traffic: the front's request
counts and latency, the worker pool's Dramatiq, delivery and automation metrics
(multiprocess, through Dramatiq's exposition server), the scheduler's lag, backlogs and
open automation runs."""

import re
import uuid

import httpx
import pytest

from ops.embedded_store import free_port
from tests.support.audience import make_contact
from tests.support.automations import make_automation, runs, trigger
from tests.support.http_receiver import HttpReceiver
from tests.support.polling import wait_until
from tests.support.private_stack import private_stack


def scrape(port: int) -> str:
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    except httpx.HTTPError:
        return ""
    return response.text if response.status_code == 200 else ""


def value(text: str, name: str, **labels) -> float:
    """The sum of the samples of `name` whose labels include `labels` (0 when none)."""
    total = 0.0
    for line in text.splitlines():
        match = re.match(r"^([a-zA-Z_:][\w:]*)(\{(.*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(3) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(match.group(4))
    return total


@pytest.fixture
def metrics_stack(service, store_url, run_dir):
    ports = {"front": free_port(), "worker": free_port(), "scheduler": free_port()}
    env = {"POSTROOM_FRONT_METRICS_PORT": str(ports["front"]), "POSTROOM_WORKER_METRICS_PORT": str(ports["worker"]),
           "POSTROOM_SCHEDULER_METRICS_PORT": str(ports["scheduler"])}
    with private_stack(service, store_url, run_dir, "metrics", env=env) as stack:
        stack.start_worker("worker")
        yield stack, ports


def test_the_numbers_move_when_mail_and_webhooks_flow(metrics_stack):
    stack, ports = metrics_stack
    tenant = stack.tenant()
    receiver = HttpReceiver().start()
    try:
        hook = tenant.post("/webhooks/triggers", json={"targetUrl": receiver.url, "event": "contact.created"})
        assert hook.status_code == 201, hook.text
        receiver.trust(hook.json()["data"]["id"], hook.json()["data"]["secret"])
        before = scrape(ports["front"])
        for n, to in enumerate(["ann@gmail.com", "bob@example.org", "cy@hotmail.fr"]):
            sent = tenant.post("/email/send", json={"to": to, "subject": f"Hi {n}", "html": "<p>Hello</p>"})
            assert sent.status_code in (200, 201, 202), sent.text
        assert tenant.post("/contacts", json={"email": "dee@example.org"}).status_code == 201
        assert tenant.get(f"/contacts/{uuid.uuid4()}").status_code == 404
        stack.smtp.wait_for("cy@hotmail.fr", timeout=60)
        receiver.wait_for(lambda r: r.accepted("contact.created"), what="the webhook delivery")

        front = scrape(ports["front"])
        assert value(front, "postroom_http_requests_total", route="/api/v1/email/send", method="POST") - \
            value(before, "postroom_http_requests_total", route="/api/v1/email/send", method="POST") == 3
        assert value(front, "postroom_http_requests_total", route="/api/v1/contacts/<uuid:contact_id>",
                     status="404") >= 1
        assert value(front, "postroom_http_request_seconds_count", route="/api/v1/email/send") >= 3

        worker = wait_until(lambda: (lambda t: t if value(t, "postroom_webhook_attempts_total",
                                                          result="delivered") >= 1 else None)(
            scrape(ports["worker"])), timeout=30, what="worker metrics after the webhook")
        delivered = {c: value(worker, "postroom_messages_total", outcome="delivered", domain_class=c)
                     for c in ("google", "microsoft", "other")}
        assert delivered == {"google": 1, "microsoft": 1, "other": 1}
        assert value(worker, "postroom_smtp_transaction_seconds_count") >= 3
        # Dramatiq's own middleware, per actor and queue (a worker serving render and send
        # delivers what it rendered in the render job)
        assert value(worker, "dramatiq_messages_total", queue_name="render", actor_name="render_messages") >= 3

        scheduler = wait_until(lambda: scrape(ports["scheduler"]), what="scheduler metrics")
        assert "postroom_scheduler_lag_seconds" in scheduler
        # every backlog is a gauge; with the mail and the webhook through, none is waiting
        due = 'postroom_backlog{backlog="webhook_deliveries_due"}'
        settled = wait_until(lambda: (lambda t: t if due in t and value(t, "postroom_backlog",
                                                                         backlog="webhook_deliveries_due") == 0
                                      else None)(scrape(ports["scheduler"])), what="the webhook backlog drained")
        for backlog in ("outbox_for_webhooks", "outbox_for_automations", "automation_runs_due"):
            assert f'postroom_backlog{{backlog="{backlog}"}}' in settled, backlog
    finally:
        receiver.stop()


def scraped_when(port: int, reached, what: str) -> str:
    """The endpoint's text once `reached(text)` holds."""
    return wait_until(lambda: (lambda t: t if t and reached(t) else None)(scrape(port)), timeout=30, what=what)


def test_automation_runs_are_counted_as_they_start_step_wait_and_end(metrics_stack):
    """Steps and ends by the engine in the worker pool; a wait ended by an event by the
    scheduler's event pass; the runs active and waiting measured from the store."""
    stack, ports = metrics_stack
    tenant = stack.tenant()
    people = [make_contact(tenant, f"flow{n}-{uuid.uuid4().hex[:6]}@example.org") for n in range(6)]
    greet = make_automation(tenant, [{"id": "greet", "step_type": "tag", "config": {"tagName": "greeted"}}],
                            name="Greet")
    wait = make_automation(tenant, [{"id": "buy", "step_type": "wait_for_event",
                                     "config": {"eventType": "purchase", "timeoutDays": 7}}], name="Wait")
    # a move to an automation that is not active fails the run
    draft = make_automation(tenant, [{"id": "t", "step_type": "tag", "config": {"tagName": "x"}}], name="Draft",
                            active=False)
    broken = make_automation(tenant, [{"id": "move", "step_type": "move_to_flow",
                                       "config": {"targetFlowId": draft["id"]}}], name="Broken")
    for contact in people[:3]:
        trigger(tenant, greet["id"], contact)
    for contact in people[3:5]:
        trigger(tenant, wait["id"], contact)
    trigger(tenant, broken["id"], people[5])

    worker = scraped_when(ports["worker"], lambda t: value(t, "postroom_automation_runs_started_total") >= 6
                          and value(t, "postroom_automation_runs_ended_total") >= 4, "the worker's run counts")
    assert value(worker, "postroom_automation_runs_started_total") == 6
    assert {s: value(worker, "postroom_automation_steps_total", step_type=s)
            for s in ("tag", "wait_for_event", "move_to_flow")} == {"tag": 3, "wait_for_event": 2, "move_to_flow": 1}
    assert {s: value(worker, "postroom_automation_runs_ended_total", status=s)
            for s in ("completed", "failed", "cancelled")} == {"completed": 3, "failed": 1, "cancelled": 0}
    # the two waiting runs are all that is open
    scraped_when(ports["scheduler"], lambda t: value(t, "postroom_automation_runs", state="active") == 2
                 and value(t, "postroom_automation_runs", state="waiting") == 2, "two runs waiting")

    # a purchase ends one wait, the flow's last step: the scheduler's event pass completes the run
    assert tenant.post("/conversions", json={"contact_id": people[3]["id"], "value": "9.99"}).status_code == 201
    scheduler = scraped_when(ports["scheduler"], lambda t: value(t, "postroom_automation_runs", state="waiting") == 1,
                             "one run waiting")
    assert value(scheduler, "postroom_automation_runs", state="active") == 1
    assert [r["status"] for r in runs(tenant, wait["id"], "completed")] == ["completed"]
    assert value(scheduler, "postroom_automation_steps_total", step_type="wait_for_event") == 1
    assert value(scheduler, "postroom_automation_runs_ended_total", status="completed") == 1
