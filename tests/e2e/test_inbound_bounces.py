"""Bounce and complaint reports sent over SMTP to the real `postroom inbound` port come
back as bounce records, message status, contact flag, suppressions, events and counters.

Every sample report (tests/support/reports, plus the two in ./inbound_samples) goes
through the port; the soft-bounce rule of the README ("suppression `soft_bounce` at the
third transient bounce of the address within 7 days") is driven end to end."""

import asyncio
import dataclasses
import datetime as dt
import socket
import string
import time
import uuid
from pathlib import Path

import aiosmtplib
import pytest

from mongo import contacts as contact_store
from mongo import inbound_reports
from tests.support import reports
from tests.support.polling import wait_until as poll

BOUNCE_DOMAIN = "bounces.postroom.test"
OWN_SAMPLES = Path(__file__).parent / "inbound_samples"


def load(name: str, *, recipient: str, message_id: str) -> bytes:
    """A sample report filled in for this message: ./inbound_samples first, then the shared
    ones (tests/support/reports), both in the same `$recipient`/`$message_id`/`$return_path`
    template form."""
    own = OWN_SAMPLES / f"{name}.eml"
    if not own.exists():
        return reports.load(name, recipient=recipient, message_id=message_id, bounce_domain=BOUNCE_DOMAIN)
    text = string.Template(own.read_text()).substitute(
        recipient=recipient, message_id=message_id, return_path=f"bounce+{message_id}@{BOUNCE_DOMAIN}")
    return text.replace("\r\n", "\n").replace("\n", "\r\n").encode()


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


def wait_applied(service, bounce_id):
    """The stored report that produced this bounce, once the `bounces` actor has finished
    with it: every effect (status, contact, suppression, event, counters) is applied by then."""
    return poll(lambda: service.store.run(lambda db: db.inbound_reports.find_one(
        {"bounce_ids": bounce_id, "status": "parsed"})), what=f"report of bounce {bounce_id} parsed")


def suppressions(tenant, **params):
    return tenant.get("/suppressions", params=params).json()["data"]


def complaints_counted(service, tenant):
    docs = service.store.run(lambda db: db.analytics_daily.find({"workspace_id": tenant.workspace_id}).to_list())
    return sum(d.get("complaints", 0) for d in docs)


def send_after(tenant, recipient):
    """What a later send to the address answers: (HTTP status, message status, suppressed)."""
    response = tenant.post("/email/send", json={"to": recipient, "subject": "Again", "text": "Hi"})
    body = response.json()["data"]
    return response.status_code, body["status"], body["suppressed_recipients"]


@dataclasses.dataclass(frozen=True)
class Case:
    sample: str
    domain: str             # the recipient's domain (the sample's provider)
    kind: str               # bounce | complaint
    type: str               # permanent | transient | undetermined
    smtp_status: str | None  # null in the API when the report has none
    diagnostic: str         # words the recorded diagnostic_code contains
    isp: str
    action: str | None      # failed | delayed | null (complaints)
    message_status: str     # the message's status once the report is applied
    suppression: str | None  # the suppression reason it creates, if any
    contact_bounced: bool
    rcpt: str = "verp"      # verp: bounce+<message id>@…; fbl: the feedback-loop address

    @property
    def source(self):
        return "arf" if self.kind == "complaint" else "dsn"

    @property
    def event(self):
        return "email.complained" if self.kind == "complaint" else "email.bounced"


P, T, U = "permanent", "transient", "undetermined"
CASES = [
    # RFC 3464 DSNs (Postfix, Gmail, Outlook.com)
    Case("rfc3464_permanent", "example.net", "bounce", P, "5.1.1", "User unknown", "example.net",
         "failed", "bounced", "hard_bounce", True),
    Case("gmail_dsn", "gmail.com", "bounce", P, "5.1.1", "does not exist. Please try double-checking", "gmail",
         "failed", "bounced", "hard_bounce", True),
    Case("outlook_dsn", "outlook.com", "bounce", P, "5.1.10", "RESOLVER.ADR.RecipientNotFound", "outlook",
         "failed", "bounced", "hard_bounce", True),
    # text-only notices: Gmail's older text, Exchange NDR, Yahoo's qmail-style failure
    Case("gmail_text", "example.com", "bounce", P, "5.2.1", "Mailbox disabled", "example.com",
         "failed", "bounced", "hard_bounce", True),
    Case("exchange_text", "contoso.com", "bounce", P, "5.1.1", "RecipNotFound", "outlook",
         "failed", "bounced", "hard_bounce", True),
    Case("yahoo_failure", "yahoo.com", "bounce", P, "554", "doesn't have a yahoo.com account", "yahoo",
         "failed", "bounced", "hard_bounce", True),
    # transient: a `delayed` warning leaves the message alone; a transient failure bounces it
    Case("rfc3464_transient", "example.org", "bounce", T, "4.2.2", "Mailbox full", "example.org",
         "delayed", "delivered", None, False),
    Case("postfix_expired", "example.org", "bounce", T, "4.4.1", "Connection timed out", "example.org",
         "failed", "bounced", None, False),
    # undetermined: no Status, no code, no known phrase
    Case("no_status_dsn", "example.edu", "bounce", U, None, "local delivery program exited abnormally",
         "example.edu", "failed", "bounced", None, False),
    # RFC 5965 ARF complaints (generic to the VERP address; Yahoo and Microsoft JMRP feedback loops)
    Case("arf_abuse", "example.com", "complaint", P, None, "complaint (abuse)", "example.com",
         None, "delivered", "complaint", False),
    Case("yahoo_arf", "yahoo.com", "complaint", P, None, "Yahoo!-Mail-Feedback", "yahoo",
         None, "delivered", "complaint", False, rcpt="fbl"),
    Case("outlook_arf", "hotmail.com", "complaint", P, None, "Junk Mail Reporting", "outlook",
         None, "delivered", "complaint", False, rcpt="fbl"),
]


def test_every_shared_sample_report_goes_through_the_inbound_port():
    """A sample added to tests/support/reports must get a row here (out_of_office is the
    unparseable one, below)."""
    assert set(reports.NAMES) - {"out_of_office"} <= {c.sample for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.sample)
def test_a_report_through_the_inbound_port_is_recorded_and_applied(service, tenant, case):
    recipient = f"r-{uuid.uuid4().hex[:6]}@{case.domain}"
    assert tenant.post("/contacts", json={"email": recipient}).status_code == 201
    message_id = sent_message(service, tenant, recipient)
    raw = load(case.sample, recipient=recipient, message_id=message_id)
    submit(service, raw, f"fbl@{BOUNCE_DOMAIN}" if case.rcpt == "fbl" else f"bounce+{message_id}@{BOUNCE_DOMAIN}")

    [record] = poll(lambda: bounces_for(tenant, recipient), what=f"bounce record for {recipient}")
    wait_applied(service, record["id"])

    # the record, as GET /bounces and GET /bounces/:id show it
    assert {k: record[k] for k in ("message_id", "email", "kind", "type", "smtp_status", "isp_name", "source",
                                   "action")} == \
        {"message_id": message_id, "email": recipient, "kind": case.kind, "type": case.type,
         "smtp_status": case.smtp_status, "isp_name": case.isp, "source": case.source, "action": case.action}
    assert case.diagnostic in record["diagnostic_code"]
    assert record["feedback_type"] == ("abuse" if case.kind == "complaint" else None)
    assert tenant.get(f"/bounces/{record['id']}").json()["data"] == record
    assert [b["id"] for b in tenant.get("/bounces", params={"type": case.type, "kind": case.kind})
            .json()["data"]] == [record["id"]]

    # the message, the contact, the suppression list
    status = tenant.get(f"/email/{message_id}/status").json()["data"]
    assert status["status"] == case.message_status
    assert bool(status["bounced_at"]) is (case.message_status == "bounced")
    contact = service.store.run(contact_store.find_by_email, tenant.workspace_id, recipient)
    assert bool(contact.get("bounced")) is case.contact_bounced
    assert [(s["email"], s["reason"], s["source"]) for s in suppressions(tenant)] == \
        ([(recipient, case.suppression, case.source)] if case.suppression else [])
    code, later_status, dropped = send_after(tenant, recipient)
    if case.suppression:
        assert (code, later_status, dropped) == (200, "suppressed", [recipient])
    else:
        assert (code, later_status, dropped) == (202, "queued", [])

    # one event through the outbox, and the counters
    [event] = poll(lambda: events(service, tenant, case.event))
    assert event["_id"] == f"{record['id']}:{case.event}"
    assert event["data"]["email"] == recipient and event["data"]["bounce_id"] == record["id"]
    if case.kind == "complaint":
        assert event["data"]["feedback_type"] == "abuse"
    else:
        # what the report did not say is null in the payload, as in GET /bounces
        assert (event["data"]["type"], event["data"]["smtp_status"]) == (case.type, case.smtp_status)
        assert event["data"]["isp_name"] == record["isp_name"]
    other = "email.bounced" if case.kind == "complaint" else "email.complained"
    assert events(service, tenant, other) == []
    totals = tenant.get("/analytics", params={"period": "1d"}).json()["data"]["totals"]
    assert totals["bounces"] == (1 if case.kind == "bounce" else 0)
    assert complaints_counted(service, tenant) == (1 if case.kind == "complaint" else 0)


def transient_bounce(service, tenant, recipient, sample):
    """Send to `recipient`, get a transient report for that message through the port, and
    return its bounce record once applied."""
    message_id = sent_message(service, tenant, recipient)
    submit(service, load(sample, recipient=recipient, message_id=message_id), f"bounce+{message_id}@{BOUNCE_DOMAIN}")
    record = poll(lambda: next((b for b in bounces_for(tenant, recipient) if b["message_id"] == message_id), None),
                  what=f"bounce of {message_id}")
    wait_applied(service, record["id"])
    assert record["type"] == "transient"
    return record


def backdate(service, bounce_id, days):
    at = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    result = service.store.run(lambda db: db.bounces.update_one({"_id": bounce_id}, {"$set": {"created_at": at}}))
    assert result.matched_count == 1


def test_the_third_transient_bounce_of_an_address_suppresses_it_as_soft_bounce(service, tenant):
    """README: transient → suppression `soft_bounce` at the third transient bounce of the
    address within 7 days; `delayed` warnings are transient bounces too."""
    recipient = f"soft-{uuid.uuid4().hex[:6]}@example.org"
    assert tenant.post("/contacts", json={"email": recipient}).status_code == 201
    for sample in ("rfc3464_transient", "postfix_expired"):
        transient_bounce(service, tenant, recipient, sample)
        assert suppressions(tenant) == []
    third = transient_bounce(service, tenant, recipient, "rfc3464_transient")

    [entry] = suppressions(tenant)
    assert (entry["email"], entry["reason"], entry["source"]) == (recipient, "soft_bounce", "dsn")
    assert suppressions(tenant, reason="soft_bounce") == [entry]
    assert "4.2.2" in entry["detail"]
    assert len(tenant.get("/bounces", params={"email": recipient, "type": "transient"}).json()["data"]) == 3
    # soft, not hard: the contact is not marked bounced
    contact = service.store.run(contact_store.find_by_email, tenant.workspace_id, recipient)
    assert not contact.get("bounced")
    assert len(events(service, tenant, "email.bounced")) == 3
    assert third["action"] == "delayed"
    assert send_after(tenant, recipient) == (200, "suppressed", [recipient])


def test_transient_bounces_older_than_7_days_do_not_count_towards_the_third(service, tenant):
    recipient = f"old-{uuid.uuid4().hex[:6]}@example.org"
    first = transient_bounce(service, tenant, recipient, "postfix_expired")
    second = transient_bounce(service, tenant, recipient, "postfix_expired")
    backdate(service, first["id"], days=8)    # outside the window
    backdate(service, second["id"], days=6)   # inside it

    transient_bounce(service, tenant, recipient, "postfix_expired")  # 3rd overall, 2nd within 7 days
    assert suppressions(tenant) == []
    assert send_after(tenant, recipient)[1] == "queued"

    transient_bounce(service, tenant, recipient, "rfc3464_transient")  # 3rd within 7 days
    [entry] = suppressions(tenant)
    assert (entry["email"], entry["reason"]) == (recipient, "soft_bounce")


def test_undetermined_bounces_do_not_count_towards_the_soft_bounce_rule(service, tenant):
    recipient = f"mixed-{uuid.uuid4().hex[:6]}@example.org"
    for sample in ("no_status_dsn", "no_status_dsn", "postfix_expired", "rfc3464_transient"):
        message_id = sent_message(service, tenant, recipient)
        submit(service, load(sample, recipient=recipient, message_id=message_id),
               f"bounce+{message_id}@{BOUNCE_DOMAIN}")
        record = poll(lambda: next((b for b in bounces_for(tenant, recipient) if b["message_id"] == message_id),
                                   None))
        wait_applied(service, record["id"])
    assert [b["type"] for b in bounces_for(tenant, recipient)].count("transient") == 2
    assert suppressions(tenant) == []


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
