"""What a receiving mail server scores, seen at a real SMTP sink behind the real stack:
the name the workers greet with, and the Feedback-ID that tells complaint rates apart."""

import uuid
from urllib.parse import urlsplit

from pipelines.domains.dns_records import is_public_host_name
from tests.support.audience import make_contact
from tests.support.automations import make_automation, trigger
from tests.support.campaigns import make_template


def test_the_workers_never_greet_as_localhost_or_an_address_and_say_so_at_start(service, tenant):
    """The suite's service runs with the README's kind of default: POSTROOM_BASE_URL on an
    IP and no POSTROOM_SMTP_HELO_NAME."""
    assert urlsplit(service.env["POSTROOM_BASE_URL"]).hostname == "127.0.0.1"
    assert "POSTROOM_SMTP_HELO_NAME" not in service.env
    rcpt = f"ehlo-{uuid.uuid4().hex[:6]}@example.org"
    assert tenant.post("/email/send", json={"to": rcpt, "subject": "Hi", "text": "t"}).status_code == 202
    [received] = service.smtp.wait_for(rcpt)
    assert received.helo and is_public_host_name(received.helo), received.helo
    assert received.helo != "localhost" and not received.helo.startswith("[")
    worker_log = (service.log_dir / "worker.log").read_text(errors="replace")
    assert f"EHLO name {received.helo} " in worker_log and "POSTROOM_SMTP_HELO_NAME" in worker_log


def test_automation_mail_carries_its_automations_id_in_feedback_id(service, tenant):
    template = make_template(tenant)
    contact = make_contact(tenant, f"flow-{uuid.uuid4().hex[:6]}@example.org")
    flow = make_automation(tenant, [{"step_type": "email", "config": {"templateId": template["id"],
                                                                       "subject": "Welcome"}}])
    trigger(tenant, flow["id"], contact)
    [received] = service.smtp.wait_for(contact["email"])
    assert received.message["Feedback-ID"] == f"{flow['id']}:{tenant.workspace_id}:marketing:postroom"
