"""Talking to the real `postroom inbound` port as a remote mail server does, and sending
the messages whose reports come back there."""

from __future__ import annotations

import asyncio
import socket
import time

import aiosmtplib

from tests.support.polling import wait_status, wait_until

BOUNCE_DOMAIN = "bounces.postroom.test"


def verp(message_id: str) -> str:
    return f"bounce+{message_id}@{BOUNCE_DOMAIN}"


def inbound_port(service) -> int:
    return int(service.env["POSTROOM_INBOUND_PORT"])


def wait_listening(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"inbound did not listen on {port}")


def session(port: int, rcpt: str, raw: bytes | None) -> tuple[int, str]:
    """As a remote MTA sends a DSN: MAIL FROM:<> (the null return path), RCPT TO, and DATA
    when `raw` is given and the recipient was accepted: the last answer's (code, text)."""
    wait_listening(port)

    async def go():
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, start_tls=False)
        await client.connect()
        try:
            await client.ehlo()
            await client.mail("")
            try:
                answer = await client.rcpt(rcpt)
            except aiosmtplib.SMTPRecipientRefused as refused:
                return refused.code, refused.message
            if raw is not None:
                answer = await client.data(raw)
            return answer.code, answer.message
        finally:
            await client.quit()
    return asyncio.run(go())


def submit_to_port(port: int, raw: bytes, rcpt: str) -> str:
    """Deliver a report; the server's answer to DATA (`2.0.0 stored as <report id>`)."""
    code, message = session(port, rcpt, raw)
    assert code == 250, (code, message)
    return message


def rcpt_answer(service, rcpt: str) -> tuple[int, str]:
    """What the inbound server answers to RCPT TO `rcpt` (nothing delivered)."""
    return session(inbound_port(service), rcpt, None)


def submit(service, raw: bytes, rcpt: str) -> str:
    """`submit_to_port` on the test service's inbound; the stored report's id."""
    return submit_to_port(inbound_port(service), raw, rcpt).rsplit(" ", 1)[-1]


def sent_message(service, tenant, to) -> str:
    """Send to `to` (one address or a list) through the API, wait until the sink has it and
    the message is `delivered`; its id."""
    response = tenant.post("/email/send", json={"to": to, "subject": "Hello", "text": "Hi"})
    assert response.status_code == 202, response.text
    message_id = response.json()["data"]["message_id"]
    for recipient in [to] if isinstance(to, str) else to:
        service.smtp.wait_for(recipient)
    wait_until(lambda: tenant.get(f"/email/{message_id}/status").json()["data"]["status"] == "delivered",
               what=f"{message_id} delivered")
    return message_id


def reports_of_sent_messages(service, samples: dict[str, tuple[list[str], bytes]]) -> dict[str, tuple]:
    """name → (tenant, message id, report id) for each sample {name: (recipients, raw report)}:
    every message is sent first, each from a workspace of its own (corpora reuse addresses),
    to the recipients and a bystander, then each report handed to the port once its message
    is delivered. The trips overlap instead of waiting in series; each test then checks its
    own sample (`report_done`)."""
    sent = {}
    for name, (recipients, _raw) in samples.items():
        tenant = service.tenant()
        to = [*recipients, f"bystander-{name}@postroom-corpus.example"]
        response = tenant.post("/email/send", json={"to": to, "subject": "Hello", "text": "Hi"})
        assert response.status_code == 202, response.text
        sent[name] = (tenant, response.json()["data"]["message_id"])
    reports = {}
    for name, (tenant, message_id) in sent.items():
        wait_status(tenant, message_id, "delivered")
        reports[name] = (tenant, message_id, submit(service, samples[name][1], verp(message_id)))
    return reports


def report_done(service, report_id: str, timeout: float = 20.0) -> dict:
    """The stored report once the `bounces` actor has finished with it (any final status)."""
    return wait_until(lambda: (r := service.store.run(lambda db: db.inbound_reports.find_one({"_id": report_id})))
                      and r["status"] != "received" and r, timeout, what=f"report {report_id} processed")


def dsn(message_id: str, recipients: list[dict], *, reporting_mta: str = "mx.example.net") -> bytes:
    """An RFC 3464 report for our message, one block per recipient: {final, original?,
    action?, status?, diagnostic?} (`final`/`original` as written after `rfc822;`, or
    whole fields like `x400; /S=bob/`)."""
    def field(value):
        return value if ";" in value else f"rfc822; {value}"
    blocks = []
    for r in recipients:
        lines = [f"Final-Recipient: {field(r['final'])}"]
        if r.get("original"):
            lines.append(f"Original-Recipient: {field(r['original'])}")
        lines.append(f"Action: {r.get('action', 'failed')}")
        if r.get("status"):
            lines.append(f"Status: {r['status']}")
        if r.get("diagnostic"):
            lines.append(f"Diagnostic-Code: smtp; {r['diagnostic']}")
        blocks.append("\n".join(lines))
    text = f"""From: MAILER-DAEMON@{reporting_mta}
To: {verp(message_id)}
Subject: Undelivered Mail Returned to Sender
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="B0UND"

--B0UND
Content-Type: text/plain; charset=us-ascii

Your message could not be delivered to one or more recipients.

--B0UND
Content-Type: message/delivery-status

Reporting-MTA: dns; {reporting_mta}

{chr(10).join(b + chr(10) for b in blocks)}
--B0UND
Content-Type: text/rfc822-headers

Message-ID: <{message_id}@postroom.test>
Subject: Hello

--B0UND--
"""
    return text.replace("\n", "\r\n").encode()


def deeply_nested(levels: int, message_id: str) -> bytes:
    """A message nested `levels` multiparts deep: Python's email package recurses walking
    it, and runs out of stack — a report that makes the parser raise."""
    text = f"From: x@example.com\r\nTo: {verp(message_id)}\r\nSubject: nested\r\nMIME-Version: 1.0\r\n"
    for i in range(levels):
        text += f'Content-Type: multipart/mixed; boundary="b{i}"\r\n\r\n--b{i}\r\n'
    text += "Content-Type: text/plain\r\n\r\nhi\r\n" + "".join(f"--b{i}--\r\n" for i in reversed(range(levels)))
    return text.encode()
