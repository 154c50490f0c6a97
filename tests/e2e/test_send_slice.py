"""The first vertical slice: an email posted to /email/send goes through RabbitMQ, the
render and send actors, into a real SMTP receiver, and its status says so."""

from tests.support.barriers import mail_barrier
from tests.support.polling import wait_status


def test_email_sent_through_rabbitmq_arrives_with_the_right_headers(service, tenant):
    response = tenant.post("/email/send", json={
        "to": "reader@example.org", "subject": "<b>Welcome</b>\r\nBcc: evil@example.org",
        "html": "<p>Hello <strong>reader</strong></p>", "from_name": "Acme Support",
        "from_email": "support@acme.example"})
    assert response.status_code == 202, response.text
    message_id = response.json()["data"]["message_id"]

    [received] = service.smtp.wait_for("reader@example.org")
    msg = received.message
    assert msg["Subject"] == "Welcome Bcc: evil@example.org"
    assert msg["Bcc"] is None
    assert msg["Reply-To"] == "support@acme.example"
    assert msg["From"].startswith("Acme Support <")
    assert msg["From"].endswith("@postroom.test>")
    assert msg["Message-ID"] == f"<{message_id}@postroom.test>"
    assert received.mail_from == f"bounce+{message_id}@bounces.postroom.test"
    assert "Hello <strong>reader</strong>" in received.body("html")
    assert "Hello reader" in received.body("plain")

    status = wait_status(tenant, message_id, "delivered")
    assert [h["status"] for h in status["history"]] == ["queued", "sent", "delivered"]
    assert status["sent_at"] and status["delivered_at"]


def test_sandbox_key_reports_mock_delivery_and_sends_nothing(service, tenant):
    sandbox = service.extra_key(tenant, sandbox=True)
    assert sandbox.key.startswith("tm_test_")
    response = sandbox.post("/email/send", json={
        "to": "sandboxed@example.org", "subject": "Hi", "text": "plain body"})
    assert response.status_code == 202
    message_id = response.json()["data"]["message_id"]
    status = wait_status(sandbox, message_id, "delivered")
    assert status["sandbox"] is True
    # Its render job, which marked it delivered, ran before the sentinel's was queued: a send
    # job it published would lead the sentinel's, which needs a render first.
    mail_barrier(service)
    assert service.smtp.messages_to("sandboxed@example.org") == []
