"""A worker configured as an operator would: a relay that offers STARTTLS with a
certificate of its own CA (POSTROOM_SMTP_TLS_CA_FILE) and an EHLO name
(POSTROOM_SMTP_HELO_NAME). The mail arrives encrypted, introduced by that name."""

from __future__ import annotations

import uuid

import pytest

from tests.support.polling import wait_status
from tests.support.private_stack import private_stack
from tests.support.tls import make_certificate


@pytest.fixture
def tls_stack(service, store_url, run_dir, tmp_path):
    certificate = make_certificate(tmp_path)
    env = {"POSTROOM_SMTP_TLS_CA_FILE": str(certificate.cert_file), "POSTROOM_SMTP_HELO_NAME": "out.acme.example"}
    with private_stack(service, store_url, run_dir, "tls", env=env, sink_options={"tls": certificate}) as stack:
        stack.start_worker("worker")
        yield stack


def test_mail_goes_over_starttls_to_a_relay_of_a_configured_ca_with_the_configured_ehlo_name(tls_stack):
    tenant = tls_stack.tenant()
    to = f"reader-{uuid.uuid4().hex[:6]}@example.org"
    response = tenant.post("/email/send", json={"to": to, "subject": "Over TLS", "text": "x"})
    assert response.status_code == 202, response.text
    wait_status(tenant, response.json()["data"]["message_id"], "delivered")
    [received] = tls_stack.smtp.messages_to(to)
    assert received.tls is True and received.helo == "out.acme.example"
