"""Bounce and complaint reports sent over SMTP to the real `postroom inbound` port come
back as bounce records, message status, contact flag, suppressions, events and counters.

Every sample report (tests/support/reports, plus the two in ./inbound_samples) goes
through the port; the soft-bounce rule of the README ("suppression `soft_bounce` at the
third transient bounce of the address within 7 days") is driven end to end. Reports are
believed only for the recipients of the message they came back for; classification by
status code decides whom they suppress; a report that makes processing raise ends
`failed` after its capped attempts, kept."""

import asyncio
import dataclasses
import datetime as dt
import string
import uuid
from pathlib import Path

import aiosmtplib
import pytest

from mongo import contacts as contact_store
from mongo import inbound_reports
from tests.support import reports
from tests.support.inbound import (
    BOUNCE_DOMAIN,
    deeply_nested,
    dsn,
    inbound_port,
    report_done,
    sent_message,
    submit,
    verp,
    wait_listening,
)
from tests.support.polling import wait_until as poll

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
    diagnostic: str | None  # words the recorded diagnostic_code contains (None: the report has none)
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
    # 5.2.1 "Mailbox disabled": a suspended mailbox, not one gone for good
    Case("gmail_text", "example.com", "bounce", T, "5.2.1", "Mailbox disabled", "example.com",
         "failed", "bounced", None, False),
    Case("exchange_text", "contoso.com", "bounce", P, "5.1.1", "RecipNotFound", "outlook",
         "failed", "bounced", "hard_bounce", True),
    Case("yahoo_failure", "yahoo.com", "bounce", P, "554", "doesn't have a yahoo.com account", "yahoo",
         "failed", "bounced", "hard_bounce", True),
    # transient: a `delayed` warning leaves the message alone; a transient failure bounces it
    Case("rfc3464_transient", "example.org", "bounce", T, "4.2.2", "Mailbox full", "example.org",
         "delayed", "delivered", None, False),
    Case("postfix_expired", "example.org", "bounce", T, "4.4.1", "Connection timed out", "example.org",
         "failed", "bounced", None, False),
    # no Status and no code: the words decide (a local delivery program failed: a mailer error)
    Case("no_status_dsn", "example.edu", "bounce", T, None, "local delivery program exited abnormally",
         "example.edu", "failed", "bounced", None, False),
    # undetermined: no Status, no diagnostic, no words about the failure (the notice quotes a
    # relay host's name, which is no relaying refusal)
    Case("no_reason_dsn", "example.edu", "bounce", U, None, None, "example.edu", "failed", "bounced", None, False),
    # RFC 5965 ARF complaints (generic to the VERP address; Yahoo and Microsoft JMRP feedback loops)
    Case("arf_abuse", "example.com", "complaint", P, None, "complaint (abuse)", "example.com",
         None, "delivered", "complaint", False),
    Case("yahoo_arf", "yahoo.com", "complaint", P, None, "Yahoo!-Mail-Feedback", "yahoo",
         None, "delivered", "complaint", False, rcpt="fbl"),
    Case("outlook_arf", "hotmail.com", "complaint", P, None, "Junk Mail Reporting", "outlook",
         None, "delivered", "complaint", False, rcpt="fbl"),
]


# why each sample failed (classify.py); complaints have no category
CATEGORY = {"rfc3464_permanent": "address", "gmail_dsn": "address", "outlook_dsn": "address", "gmail_text": "address",
            "exchange_text": "address", "yahoo_failure": "address", "rfc3464_transient": "mailbox_full",
            "postfix_expired": "system", "no_status_dsn": "system", "no_reason_dsn": "other"}


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
    if case.diagnostic is None:
        assert record["diagnostic_code"] is None
    else:
        assert case.diagnostic in record["diagnostic_code"]
    assert record["category"] == CATEGORY.get(case.sample)
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
    at = (dt.datetime.now(dt.UTC) - dt.timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
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
    for sample in ("no_reason_dsn", "no_reason_dsn", "postfix_expired", "rfc3464_transient"):
        message_id = sent_message(service, tenant, recipient)
        submit(service, load(sample, recipient=recipient, message_id=message_id),
               f"bounce+{message_id}@{BOUNCE_DOMAIN}")
        record = poll(lambda message_id=message_id: next(
            (b for b in bounces_for(tenant, recipient) if b["message_id"] == message_id), None))
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


def report_of(service, report_id):
    return service.store.run(lambda db: db.inbound_reports.find_one({"_id": report_id}))


def test_a_report_naming_an_address_we_never_sent_to_bounces_nobody(service, tenant):
    recipient = f"bob-{uuid.uuid4().hex[:6]}@example.net"
    victim = f"victim-{uuid.uuid4().hex[:6]}@unrelated.example"
    assert tenant.post("/contacts", json={"email": victim}).status_code == 201
    message_id = sent_message(service, tenant, recipient)
    raw = reports.load("rfc3464_permanent", recipient=victim, message_id=message_id, bounce_domain=BOUNCE_DOMAIN)

    report = report_done(service, submit(service, raw, verp(message_id)))

    assert (report["status"], report["ignored_recipients"], report["message_id"], report["workspace_id"]) == \
        ("unmatched", [victim], message_id, tenant.workspace_id)
    assert victim in report["detail"] and message_id in report["detail"]
    assert bounces_for(tenant, victim) == [] and bounces_for(tenant, recipient) == []
    assert suppressions(tenant) == []
    assert tenant.get(f"/email/{message_id}/status").json()["data"]["status"] == "delivered"
    contact = service.store.run(contact_store.find_by_email, tenant.workspace_id, victim)
    assert not contact.get("bounced")
    assert events(service, tenant, "email.bounced") == []


def test_of_the_recipients_a_report_names_only_those_the_message_went_to_are_bounced(service, tenant):
    """A forwarded address (Final-Recipient) is matched through Original-Recipient; an
    X.400 Final-Recipient leaves the Original-Recipient; a stranger in the same report is
    ignored."""
    tag = uuid.uuid4().hex[:6]
    alice, bob, carol = (f"{n}-{tag}@example.net" for n in ("alice", "bob", "carol"))
    stranger = f"stranger-{tag}@unrelated.example"
    message_id = sent_message(service, tenant, [alice, bob, carol])
    raw = dsn(message_id, [
        {"final": f"alice@forwarded-{tag}.example", "original": alice, "status": "5.1.1",
         "diagnostic": "550 5.1.1 user unknown"},
        {"final": "x400; /S=bob/PRMD=EXAMPLE/C=GB/", "original": bob, "status": "5.1.1"},
        {"final": stranger, "status": "5.1.1"},
    ])
    report = report_done(service, submit(service, raw, verp(message_id)))

    assert (report["status"], report["ignored_recipients"]) == ("parsed", [stranger])
    recorded = {b["email"]: b for b in tenant.get("/bounces").json()["data"]}
    assert set(recorded) == {alice, bob}
    assert {b["type"] for b in recorded.values()} == {"permanent"}
    assert sorted(s["email"] for s in suppressions(tenant)) == sorted([alice, bob])
    assert bounces_for(tenant, carol) == [] and bounces_for(tenant, stranger) == []


def test_a_complaint_with_the_recipient_redacted_is_the_complaint_of_the_messages_one_recipient(service, tenant):
    recipient = f"alice-{uuid.uuid4().hex[:6]}@example.com"
    message_id = sent_message(service, tenant, recipient)
    raw = reports.load("arf_abuse", recipient="redacted@example.com", message_id=message_id,
                       bounce_domain=BOUNCE_DOMAIN)
    raw = raw.replace(b"Original-Rcpt-To: <redacted@example.com>\r\n", b"").replace(b"redacted@example.com",
                                                                                      b"xxxxxxxxxxxx")
    assert b"redacted" not in raw and message_id.encode() in raw
    report = report_done(service, submit(service, raw, f"fbl@{BOUNCE_DOMAIN}"))  # our Message-ID says whose

    assert (report["status"], report["message_id"], report["ignored_recipients"]) == ("parsed", message_id, [])
    [record] = bounces_for(tenant, recipient)
    assert (record["kind"], record["message_id"], record["source"]) == ("complaint", message_id, "arf")
    assert [(s["email"], s["reason"]) for s in suppressions(tenant)] == [(recipient, "complaint")]


def test_a_redacted_complaint_about_a_message_to_several_recipients_suppresses_nobody(service, tenant):
    tag = uuid.uuid4().hex[:6]
    message_id = sent_message(service, tenant, [f"a-{tag}@example.com", f"b-{tag}@example.com"])
    raw = reports.load("arf_abuse", recipient="redacted@example.com", message_id=message_id,
                       bounce_domain=BOUNCE_DOMAIN)
    raw = raw.replace(b"Original-Rcpt-To: <redacted@example.com>\r\n", b"").replace(b"redacted@example.com",
                                                                                      b"xxxxxxxxxxxx")
    report = report_done(service, submit(service, raw, f"fbl@{BOUNCE_DOMAIN}"))
    assert (report["status"], report["ignored_recipients"]) == ("unmatched", ["(no address)"])
    assert suppressions(tenant) == [] and tenant.get("/bounces").json()["data"] == []


@pytest.mark.parametrize("status, diagnostic, type_, category, suppression", [
    ("5.7.1", "550 5.7.1 Message rejected as unsolicited mail (reputation)", "transient", "policy", None),
    ("5.3.4", "552 5.3.4 Message size exceeds fixed limit", "transient", "message", None),
    ("5.2.2", "552 5.2.2 Mailbox full", "transient", "mailbox_full", None),
    ("553", "", "permanent", "address", "hard_bounce"),   # a bare basic code is a code
    ("5.1.1", "550 5.1.1 User unknown", "permanent", "address", "hard_bounce"),
], ids=["policy-5.7.1", "size-5.3.4", "full-5.2.2", "bare-553", "unknown-5.1.1"])
def test_the_status_code_decides_whether_a_bounce_suppresses(service, tenant, status, diagnostic, type_, category,
                                                              suppression):
    recipient = f"code-{uuid.uuid4().hex[:6]}@example.org"
    assert tenant.post("/contacts", json={"email": recipient}).status_code == 201
    message_id = sent_message(service, tenant, recipient)
    raw = dsn(message_id, [{"final": recipient, "status": status, "diagnostic": diagnostic}])
    report = report_done(service, submit(service, raw, verp(message_id)))
    assert report["status"] == "parsed"

    [record] = bounces_for(tenant, recipient)
    assert (record["type"], record["category"], record["smtp_status"]) == (type_, category, status)
    assert tenant.get(f"/email/{message_id}/status").json()["data"]["status"] == "bounced"
    contact = service.store.run(contact_store.find_by_email, tenant.workspace_id, recipient)
    assert bool(contact.get("bounced")) is (suppression == "hard_bounce")
    assert [s["reason"] for s in suppressions(tenant)] == ([suppression] if suppression else [])
    [event] = poll(lambda: events(service, tenant, "email.bounced"))
    assert (event["data"]["type"], event["data"]["category"]) == (type_, category)
    assert send_after(tenant, recipient)[1] == ("suppressed" if suppression else "queued")


def test_policy_blocks_never_add_up_to_a_soft_bounce(service, tenant):
    """Three 5.7.1 reputation blocks in a week would be three transient bounces; they say
    nothing against the address, so they do not count towards `soft_bounce`."""
    recipient = f"blocked-{uuid.uuid4().hex[:6]}@example.org"
    for _ in range(3):
        message_id = sent_message(service, tenant, recipient)
        raw = dsn(message_id, [{"final": recipient, "status": "5.7.1", "diagnostic": "550 5.7.1 blocked (reputation)"}])
        assert report_done(service, submit(service, raw, verp(message_id)))["status"] == "parsed"
    assert len(bounces_for(tenant, recipient)) == 3
    assert suppressions(tenant) == []


def test_a_report_that_makes_the_parser_raise_ends_failed_after_its_attempts_and_is_kept(service):
    from pipelines.workflows.bounce_reports import MAX_REPORT_ATTEMPTS
    before = service.store.run(inbound_reports.stats)
    message_id = "msg_" + uuid.uuid4().hex
    raw = deeply_nested(1200, message_id)
    report_id = submit(service, raw, verp(message_id))

    report = report_done(service, report_id, timeout=60)
    assert (report["status"], report["attempts"]) == ("failed", MAX_REPORT_ATTEMPTS)
    assert "RecursionError" in report["last_error"] and "RecursionError" in report["detail"]
    assert inbound_reports.raw_bytes(report) == raw
    # the totals move just after the status (mongo/inbound_reports.finish): wait for them
    poll(lambda: service.store.run(inbound_reports.stats)["failed"] >= before["failed"] + 1,
         what="the failed report counted")
