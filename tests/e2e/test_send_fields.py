"""Issue #35's sending fields end to end, through the real front, RabbitMQ, the render and
send actors and the SMTP sink: cc in the Cc header and bcc in the envelope only; inline and
attached files read back byte for byte by Python's parser and by mail-parser, with DKIM
verifying over them; hostile header values and file names refused or encoded; the 10 MB
limit exactly; metadata and tags in every webhook event of the message; a bounced cc
suppresses that address alone."""

import base64
import email
import email.policy
import os
import re
import uuid

import dkim as dkimpy
import httpx
import mailparser
import pytest

from tests.support import reports
from tests.support.api import assert_error
from tests.support.dkim_dns import dnsfunc_for, publish_service_zone
from tests.support.http_receiver import HttpReceiver, subscribe
from tests.support.inbound import report_done, submit, verp
from tests.support.polling import wait_status, wait_until

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(3000)
PDF = b"%PDF-1.7\n" + os.urandom(20000) + b"\n%%EOF\n"
MB = 1024 * 1024


def address(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}@fields.example"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def verify_dkim(service, dns_server):
    publish_service_zone(service, dns_server)
    dnsfunc = dnsfunc_for(dns_server)
    return lambda data: dkimpy.verify(data, dnsfunc=dnsfunc)


def sent(tenant, **body):
    response = tenant.post("/email/send", json={"subject": "Your receipt", **body})
    assert response.status_code == 202, response.text
    return response.json()["data"]["message_id"]


def strict(received):
    return email.message_from_bytes(received.data, policy=email.policy.strict)


def head(received) -> bytes:
    return received.data.split(b"\r\n\r\n", 1)[0]


def test_cc_is_in_the_header_and_bcc_only_in_the_envelope(service, tenant, verify_dkim):
    to, cc, bcc = address("to"), [address("cc1"), address("cc2")], [address("bcc1"), address("bcc2")]
    message_id = sent(tenant, to=to, cc=cc, bcc=bcc, html="<p>Thanks</p>")

    [received] = service.smtp.wait_for(bcc[1])
    assert sorted(received.rcpt_tos) == sorted([to, *cc, *bcc])  # one transaction, every recipient
    msg = strict(received)
    assert msg["To"] == to and [a.addr_spec for a in msg["Cc"].addresses] == cc
    assert msg["Bcc"] is None
    assert not any(b.split("@")[0].encode() in head(received).lower() for b in bcc)  # in no header
    assert not any(b.encode() in received.data for b in bcc)  # nor anywhere in the message
    assert verify_dkim(received.data)
    status = wait_status(tenant, message_id, "delivered")
    assert (status["cc"], status["bcc"]) == (cc, bcc)
    assert service.smtp.recipient_counts()[bcc[0].lower()] == 1


def test_inline_and_attached_files_parse_back_byte_for_byte_with_two_parsers_and_dkim_verifies(
        service, tenant, verify_dkim):
    to = address("files")
    blob = os.urandom(70000)
    files = [
        {"filename": "logo.png", "content": b64(PNG), "content_id": "cid:logo@fields"},
        {"filename": "Quittung März 2026.pdf", "content": b64(PDF), "content_type": "application/pdf"},
        {"filename": 'report "final"; v2 (copy).bin', "content": b64(blob)},
        {"filename": "請求書" * 20 + ".pdf", "content": b64(PDF)},
    ]
    sent(tenant, to=to, html='<p>Hi</p><img src="cid:logo@fields" alt="logo">', text="Hi",
         attachments=files)

    [received] = service.smtp.wait_for(to)
    assert verify_dkim(received.data)
    msg = strict(received)
    assert msg.get_content_type() == "multipart/mixed"
    alternative = msg.get_payload()[0]
    assert alternative.get_content_type() == "multipart/alternative"
    related = alternative.get_payload()[1]
    assert related.get_content_type() == "multipart/related"
    html, logo = related.get_payload()
    assert 'src="cid:logo@fields"' in html.get_content()
    assert logo["Content-ID"] == "<logo@fields>" and logo.get_content_disposition() == "inline"
    assert logo.get_content() == PNG
    attached = msg.get_payload()[1:]
    expected = [(f["filename"], base64.b64decode(f["content"])) for f in files[1:]]
    assert [(p.get_filename(), p.get_content()) for p in attached] == expected
    assert [p.get_content_type() for p in attached] == ["application/pdf", "application/octet-stream",
                                                      "application/pdf"]
    assert all(p.get_content_disposition() == "attachment" for p in attached)

    second = mailparser.parse_from_bytes(received.data)
    by_payload = {base64.b64decode(a["payload"]): a for a in second.attachments}
    assert set(by_payload) == {PNG, PDF, blob}  # both PDFs are the same bytes
    assert by_payload[PNG]["filename"] == "logo.png" and by_payload[PNG]["content-id"] == "<logo@fields>"
    assert by_payload[blob]["filename"] == files[2]["filename"]  # quotes and a semicolon kept as written
    assert second.to == [("", to)]


def test_hostile_header_values_and_file_names_are_refused_or_arrive_as_text(service, tenant, verify_dkim):
    to = address("headers")
    literal = "=?utf-8?q?Hello=0D=0AX-Injected:_yes?="
    long_id = "<" + "a" * 150 + "@threads.example>"
    sent(tenant, to=to, text="x", headers={
        "X-Note": literal, "X-Umlaut": "Grüße aus Köln", "In-Reply-To": long_id,
        "References": f"<first@threads.example> {long_id}", "List-Help": "<mailto:help@fields.example>"})
    [received] = service.smtp.wait_for(to)
    msg = strict(received)
    assert msg["X-Injected"] is None
    assert (msg["X-Note"], msg["X-Umlaut"]) == (literal, "Grüße aus Köln")
    assert msg["In-Reply-To"] == long_id and long_id.encode() in head(received)  # whole, not an encoded word
    assert msg["References"].split() == ["<first@threads.example>", long_id]
    signature = msg["DKIM-Signature"].replace("\r\n", "").replace("\t", "").replace(" ", "")
    assert all(name in signature for name in ("x-note", "x-umlaut", "in-reply-to", "references", "list-help"))
    assert verify_dkim(received.data)

    for headers, path in [({"X-A": "1\r\nBcc: victim@fields.example"}, "headers.X-A"),
                          ({"Bcc": "victim@fields.example"}, "headers.Bcc"),
                          ({"Content-Type": "text/html"}, "headers.Content-Type")]:
        assert_error(tenant.post("/email/send", json={"to": to, "subject": "x", "text": "x", "headers": headers}),
                     400, "validation_error", path)
    for name in ["a.pdf\r\nContent-Type: text/html", "a\x00.pdf", "evil\u202etxt.exe", "x.scr",
                 "invoice.pdf =?utf-8?q?=0D=0Aevil.exe?="]:
        response = tenant.post("/email/send", json={"to": to, "subject": "x", "text": "x", "attachments": [
            {"filename": name, "content": b64(PDF)}]})
        assert_error(response, 400, "validation_error", "attachments[0].filename")


def test_ten_megabytes_of_files_are_sent_and_one_byte_more_is_refused(service, tenant, verify_dkim):
    to = address("big")
    first, second = os.urandom(6 * MB), os.urandom(4 * MB)
    sent(tenant, to=to, text="two files", attachments=[{"filename": "a.bin", "content": b64(first)},
                                                       {"filename": "b.bin", "content": b64(second)}])
    [received] = service.smtp.wait_for(to, timeout=60)
    assert [p.get_content() for p in strict(received).iter_attachments()] == [first, second]
    assert verify_dkim(received.data)

    over = {"to": to, "subject": "x", "text": "x"}
    response = tenant.post("/email/send", json={**over, "attachments": [
        {"filename": "a.bin", "content": b64(first)}, {"filename": "b.bin", "content": b64(second + b"x")}]})
    assert_error(response, 400, "validation_error", "attachments")
    response = tenant.post("/email/send", json={**over, "attachments": [
        {"filename": "a.bin", "content": b64(os.urandom(10 * MB + 1))}]})
    assert_error(response, 400, "validation_error", "attachments[0].content")


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


EVENTS = ("email.sent", "email.delivered", "email.bounced", "email.opened", "email.clicked", "email.complained")


def test_metadata_and_tags_ride_every_webhook_event_of_the_message(service, receiver):
    tenant = service.tenant()
    for event in EVENTS:
        subscribe(tenant, receiver, event)
    to, refused = address("reader"), address("gone")
    service.smtp.reject(refused)
    metadata, tags = {"order_id": "A-1001", "customer.tier": "gold"}, ["receipt", "eu-1"]
    message_id = sent(tenant, to=to, cc=refused, html='<p><a href="https://shop.example/o/1">Your order</a></p>',
                      track_opens=True, track_clicks=True, metadata=metadata, tags=tags)
    [mail] = service.smtp.wait_for(to)
    html = mail.body()
    assert httpx.get(re.search(r'<img src="([^"]+/t/o/[^"]+\.gif)"', html).group(1)).status_code == 200
    click = re.search(r'href="([^"]+/t/c/[^"]+)"', html).group(1)
    assert httpx.get(click, follow_redirects=False).status_code in (302, 303, 307)
    report_done(service, submit(service, reports.load("arf_abuse", recipient=to, message_id=message_id),
                                verp(message_id)))

    def every_event():
        got = {e: receiver.accepted(e) for e in EVENTS}
        return got if all(got.values()) else None
    got = wait_until(every_event, timeout=30, what="one webhook of each email event")
    for event, requests in got.items():
        for request in requests:
            data = request.json["data"]
            assert (data["metadata"], data["tags"]) == (metadata, tags), (event, data)
            assert data["message_id"] == message_id
    assert {r.json["data"]["email"] for r in got["email.bounced"]} == {refused}


def test_a_bounced_cc_suppresses_only_that_recipient(service):
    tenant = service.tenant()
    to, cc, bcc = address("to"), address("cc-bounces"), address("bcc")
    service.smtp.reject(cc, 550, "5.1.1 mailbox unknown")
    message_id = sent(tenant, to=to, cc=[cc], bcc=[bcc], text="x")
    service.smtp.wait_for(to)
    status = wait_status(tenant, message_id, "delivered")
    assert status["history"][-1]["status"] == "delivered"
    entries = wait_until(lambda: tenant.get("/suppressions").json()["data"], what="the cc's suppression")
    assert [(e["email"], e["reason"]) for e in entries] == [(cc, "hard_bounce")]
    [bounce] = tenant.get("/bounces").json()["data"]
    assert (bounce["email"], bounce["message_id"]) == (cc, message_id)

    again = tenant.post("/email/send", json={"to": to, "cc": cc, "bcc": bcc, "subject": "again", "text": "x"})
    assert again.status_code == 202 and again.json()["data"]["suppressed_recipients"] == [cc]
    [_, second] = service.smtp.wait_for(to, count=2)
    assert sorted(second.rcpt_tos) == sorted([to, bcc]) and strict(second)["Cc"] is None
