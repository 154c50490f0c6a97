"""Mail to a workspace's inbound address, end to end (issue 36): aiosmtplib talks to the
real `postroom inbound` port; the `inbound` actor authenticates against the loopback DNS
zone, parses and routes it; the route's real HTTP receiver gets `email.received`, signed
with the route's secret (checked with docs/webhooks.md's helper), field by field. A
tampered copy fails DKIM; an over-size message is refused at MAIL FROM (552, SIZE
announced); an unknown recipient at RCPT (550); another workspace's route never receives
it (barrier: that workspace's own message, sent after, is the only one its receiver gets). A
workspace webhook subscribed to `email.received` gets the same event."""

import asyncio
import base64
import hashlib

import aiosmtplib
import dkim
import pytest

from pipelines.messages.dkim import generate_key_pair
from tests.support.http_receiver import HttpReceiver, subscribe
from tests.support.inbound import inbound_port, rcpt_answer, wait_listening
from tests.support.inbound_mail import address_of, mail, make_route

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
SUBJECT = "Re: Ticket 42 — ça marche"


@pytest.fixture
def receivers():
    started = [HttpReceiver().start(), HttpReceiver().start(), HttpReceiver().start()]
    yield started
    for receiver in started:
        receiver.stop()


def send(service, raw: bytes, rcpt: str, mail_from: str = "ann@sender.example") -> None:
    port = inbound_port(service)
    wait_listening(port)
    asyncio.run(aiosmtplib.send(raw, sender=mail_from, recipients=[rcpt], hostname="127.0.0.1", port=port,
                                start_tls=False, local_hostname="mx.sender.example"))


def signed(raw: bytes, private_pem: str) -> bytes:
    """`raw` with a DKIM-Signature header (dkimpy returns the header alone)."""
    return dkim.sign(raw, b"s1", b"sender.example", private_pem.encode(),
                     include_headers=[b"from", b"to", b"subject", b"message-id"]) + raw


def received_by(receiver, n: int):
    return receiver.wait_for(lambda r: len(r.accepted("email.received")) >= n and r.accepted("email.received"),
                             timeout=30, what=f"{n} email.received")


def test_a_dkim_signed_reply_reaches_the_routes_receiver_signed_parsed_and_verified(service, dns_server, receivers):
    ours, theirs, hooks = receivers
    tenant, other = service.tenant(), service.tenant()
    subscribe(tenant, hooks, "email.received")  # a workspace webhook gets every email.received too
    key = generate_key_pair()
    dns_server.set("s1._domainkey.sender.example", "TXT", key.txt_value)
    route = make_route(tenant, ours.url, address_of(tenant).replace("@", "+ticket-*@"))
    ours.trust(route["id"], route["secret"])
    their_route = make_route(other, theirs.url, "*")
    theirs.trust(their_route["id"], their_route["secret"])
    to = address_of(tenant, "ticket-42")
    raw = signed(mail(to=to, subject=SUBJECT, attachment=("screen.png", "image/png", PNG)), key.private_pem)

    send(service, raw, to)
    [got] = received_by(ours, 1)
    assert got.verified is True and got.headers["x-service-webhook-id"] == route["id"]
    body = got.json
    assert body["event"] == "email.received" and body["timestamp"].endswith("Z")
    data = body["data"]
    assert data["recipient"] == to and data["tag"] == "ticket-42"
    assert data["route"] == {"id": route["id"], "pattern": route["pattern"]}
    assert data["envelope"] == {"mail_from": "ann@sender.example", "rcpt_to": to, "client_ip": "127.0.0.1",
                                "helo": "mx.sender.example"}
    message = data["message"]
    assert message["from"] == {"address": "ann@sender.example", "name": "Ann Smith"}
    assert [a["address"] for a in message["to"]] == [to]
    assert message["subject"] == SUBJECT and message["message_id"] == "<reply-1@sender.example>"
    assert message["text"].strip() == "Thanks, that worked." and message["auto_submitted"] is False
    [attachment] = message["attachments"]
    assert attachment["filename"] == "screen.png" and attachment["content_type"] == "image/png"
    assert attachment["size"] == len(PNG) and attachment["sha256"] == hashlib.sha256(PNG).hexdigest()
    assert base64.b64decode(attachment["content_b64"]) == PNG
    [verdict] = data["authentication"]["dkim"]
    assert (verdict["result"], verdict["domain"], verdict["selector"]) == ("pass", "sender.example", "s1")
    assert "dkim=pass" in data["authentication"]["summary"]

    # the workspace's webhook got the same event, signed with its own secret
    [hooked] = received_by(hooks, 1)
    assert hooked.verified is True and hooked.body == got.body
    assert hooked.headers["x-service-delivery-id"].split(":")[0] == got.headers["x-service-delivery-id"].split(":")[0]

    # the API shows the same message, and its raw bytes as received
    shown = tenant.get(f"/inbound/messages/{data['inbound_message_id']}").json()["data"]
    assert shown["status"] == "processed" and shown["route_id"] == route["id"]
    assert tenant.get(f"/inbound/messages/{data['inbound_message_id']}/raw").content == raw

    # a tampered copy: the body changed after signing
    send(service, raw.replace(b"that worked", b"that FAILED"), to)
    tampered = received_by(ours, 2)[1].json["data"]
    assert tampered["message"]["text"].strip() == "Thanks, that FAILED."
    assert [d["result"] for d in tampered["authentication"]["dkim"]] == ["fail"]

    # refused at the door: an unknown address, and a message over the announced SIZE
    assert rcpt_answer(service, "aaaaaaaaaaaaaaaa@inbound.postroom.test")[0] == 550
    assert rcpt_answer(service, f"someone@{to.split('@')[1]}.example")[0] == 550
    with pytest.raises(aiosmtplib.SMTPResponseException) as refused:
        send(service, b"Subject: big\r\n\r\n" + b"x" * (10 * 1024 * 1024), to)
    assert refused.value.code == 552

    # the other workspace's catch-all route got none of it: its own message, sent after, is its first
    send(service, mail(to=address_of(other), subject="for them"), address_of(other))
    [theirs_got] = received_by(theirs, 1)
    assert theirs_got.json["data"]["message"]["subject"] == "for them" and theirs_got.verified is True
    assert len(ours.accepted("email.received")) == 2
