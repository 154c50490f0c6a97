"""Bounce and complaint reports sent over SMTP to the real `postroom inbound` port come
back as bounce records, message status, contact flag, suppressions and events."""

import asyncio
import socket
import time
import uuid

import aiosmtplib
import pytest

from mongo import contacts as contact_store
from mongo import inbound_reports
from tests.support import reports
from tests.support.polling import wait_until as poll

BOUNCE_DOMAIN = "bounces.postroom.test"


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


def submit(service, raw: bytes, rcpt: str) -> None:
    """As a remote MTA sends a DSN: with the null return path `MAIL FROM:<>`."""
    port = inbound_port(service)
    wait_listening(port)

    async def go():
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, start_tls=False)
        await client.connect()
        try:
            await client.ehlo()
            await client.mail("")
            await client.rcpt(rcpt)
            code, _ = await client.data(raw)
            assert code == 250
        finally:
            await client.quit()
    asyncio.run(go())




def sent_message(service, tenant, recipient):
    response = tenant.post("/email/send", json={"to": recipient, "subject": "Hello", "text": "Hi"})
    assert response.status_code == 202, response.text
    message_id = response.json()["data"]["message_id"]
    service.smtp.wait_for(recipient)
    poll(lambda: tenant.get(f"/email/{message_id}/status").json()["data"]["status"] == "delivered")
    return message_id


def bounces_for(tenant, email):
    return tenant.get("/bounces", params={"email": email}).json()["data"]


def events(service, tenant, event):
    return service.store.run(lambda db: db.outbox.find({"workspace_id": tenant.workspace_id,
                                                        "event": event}).to_list())


CASES = [  # sample, recipient domain, type, smtp_status, isp
    ("rfc3464_permanent", "example.net", "permanent", "5.1.1", "example.net"),
    ("gmail_dsn", "gmail.com", "permanent", "5.1.1", "gmail"),
    ("outlook_dsn", "outlook.com", "permanent", "5.1.10", "outlook"),
    ("yahoo_failure", "yahoo.com", "permanent", "5.0.0", "yahoo"),
]


@pytest.mark.parametrize("sample, domain, type_, status, isp", CASES)
def test_a_dsn_to_the_verp_address_bounces_the_message(service, tenant, sample, domain, type_, status, isp):
    recipient = f"gone-{uuid.uuid4().hex[:6]}@{domain}"
    tenant.post("/contacts", json={"email": recipient})
    message_id = sent_message(service, tenant, recipient)
    raw = reports.load(sample, recipient=recipient, message_id=message_id)
    submit(service, raw, f"bounce+{message_id}@{BOUNCE_DOMAIN}")

    [bounce] = poll(lambda: bounces_for(tenant, recipient))
    assert (bounce["type"], bounce["smtp_status"], bounce["isp_name"], bounce["source"], bounce["message_id"]) == \
        (type_, status, isp, "dsn", message_id)
    detail = tenant.get(f"/bounces/{bounce['id']}").json()["data"]
    assert detail["diagnostic_code"] and detail == bounce
    status_view = poll(lambda: (s := tenant.get(f"/email/{message_id}/status").json()["data"])["status"] == "bounced" and s)
    assert status_view["bounced_at"]
    contact = service.store.run(contact_store.find_by_email, tenant.workspace_id, recipient)
    assert bool(contact["bounced"]) is True
    [entry] = tenant.get("/suppressions", params={"reason": "hard_bounce"}).json()["data"]
    assert entry["email"] == recipient and entry["source"] == "dsn"
    [event] = poll(lambda: events(service, tenant, "email.bounced"))
    assert event["data"]["email"] == recipient and event["data"]["type"] == type_
    assert event["_id"] == f"{bounce['id']}:email.bounced"


def test_a_complaint_to_the_feedback_address_suppresses_and_emits_complained(service, tenant):
    recipient = f"angry-{uuid.uuid4().hex[:6]}@yahoo.com"
    message_id = sent_message(service, tenant, recipient)
    submit(service, reports.load("yahoo_arf", recipient=recipient, message_id=message_id), f"fbl@{BOUNCE_DOMAIN}")
    [event] = poll(lambda: events(service, tenant, "email.complained"))
    assert event["data"]["email"] == recipient and event["data"]["feedback_type"] == "abuse"
    [entry] = tenant.get("/suppressions", params={"reason": "complaint"}).json()["data"]
    assert entry["email"] == recipient
    [record] = tenant.get("/bounces", params={"kind": "complaint"}).json()["data"]
    assert record["source"] == "arf" and record["isp_name"] == "yahoo"
    assert tenant.get(f"/email/{message_id}/status").json()["data"]["status"] == "delivered"


def test_the_same_report_twice_records_one_bounce_and_one_event(service, tenant):
    recipient = f"twice-{uuid.uuid4().hex[:6]}@example.net"
    message_id = sent_message(service, tenant, recipient)
    raw = reports.load("rfc3464_permanent", recipient=recipient, message_id=message_id)
    verp = f"bounce+{message_id}@{BOUNCE_DOMAIN}"
    submit(service, raw, verp)
    submit(service, raw, verp)
    done = poll(lambda: (d := service.store.run(lambda db: db.inbound_reports.find({"rcpt_tos": verp}).to_list()))
                and all(r["status"] == "parsed" for r in d) and len(d) == 2 and d)
    assert done[0]["bounce_ids"] == done[1]["bounce_ids"]
    assert len(bounces_for(tenant, recipient)) == 1
    assert len(events(service, tenant, "email.bounced")) == 1


def test_an_unparseable_report_is_stored_and_counted(service, tenant):
    before = service.store.run(inbound_reports.stats)
    message_id = "msg_" + uuid.uuid4().hex
    raw = reports.load("out_of_office", recipient="carol@example.com", message_id=message_id)
    submit(service, raw, f"bounce+{message_id}@{BOUNCE_DOMAIN}")
    after = poll(lambda: (s := service.store.run(inbound_reports.stats))["unparseable"] > before["unparseable"] and s)
    assert after["received"] >= before["received"] + 1
    [stored] = service.store.run(lambda db: db.inbound_reports.find(
        {"rcpt_tos": f"bounce+{message_id}@{BOUNCE_DOMAIN}"}).to_list())
    assert stored["status"] == "unparseable" and inbound_reports.raw_bytes(stored) == raw


def test_mail_for_other_addresses_is_refused(service):
    port = inbound_port(service)
    wait_listening(port)
    with pytest.raises(aiosmtplib.SMTPRecipientsRefused):
        asyncio.run(aiosmtplib.send(b"Subject: x\r\n\r\nx", sender="a@b.c", recipients=["someone@example.org"],
                                    hostname="127.0.0.1", port=port))


def test_a_synchronous_rejection_becomes_a_bounce_record(service, tenant):
    recipient = f"rejected-{uuid.uuid4().hex[:6]}@example.org"
    service.smtp.reject(recipient, 550, "5.1.1 user unknown")
    response = tenant.post("/email/send", json={"to": recipient, "subject": "Hi", "text": "x"})
    message_id = response.json()["data"]["message_id"]
    [bounce] = poll(lambda: bounces_for(tenant, recipient))
    assert (bounce["source"], bounce["type"], bounce["smtp_status"], bounce["message_id"]) == \
        ("smtp", "permanent", "5.1.1", message_id)
    assert poll(lambda: tenant.get("/suppressions", params={"reason": "hard_bounce"}).json()["data"])
    assert tenant.get(f"/email/{message_id}/status").json()["data"]["status"] == "bounced"
