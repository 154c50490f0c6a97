"""Mail as the render step makes and signs it, checked as a receiver checks it: dkimpy
fetches the key from a real DNS server on loopback. Changing any header a receiver (or its
reader) relies on, or adding one, breaks the signature — including the ones we never
write, which a forwarder or forger could otherwise add to signed mail."""

import re

import dkim as dkimpy
import pytest
from cryptography.hazmat.primitives import serialization

from pipelines.core.settings import Settings
from pipelines.messages import dkim
from pipelines.templates.render_message import RenderContext, render_one
from tests.support.dkim_dns import dnsfunc_for

SETTINGS = Settings(secret_key="k", base_url="https://mail.example")
PAIR = dkim.generate_key_pair()
SIGNER = dkim.Signer("postroom.test", "pr1", serialization.load_pem_private_key(PAIR.private_pem.encode(), None))

# Written out here rather than read from pipelines.messages.dkim, so the test says what a receiver
# relies on and the code has to follow.
RELIED_ON = ("From", "Sender", "To", "Cc", "Subject", "Date", "Message-ID", "Reply-To", "In-Reply-To",
             "References", "MIME-Version", "Content-Type", "Content-Transfer-Encoding", "Content-Disposition",
             "List-Unsubscribe", "List-Unsubscribe-Post", "List-Id", "Feedback-ID", "Auto-Submitted",
             "Precedence")
ADDED_VALUES = {"From": "ceo@bank.example", "Sender": "ceo@bank.example", "To": "victim@example.org",
                "Cc": "boss@example.org", "Subject": "Urgent", "Date": "Mon, 1 Jan 2024 00:00:00 +0000",
                "Message-ID": "<forged@example.org>", "Reply-To": "thief@evil.example",
                "In-Reply-To": "<thread@bank.example>", "References": "<thread@bank.example>",
                "MIME-Version": "1.0", "Content-Type": "text/html", "Content-Transfer-Encoding": "base64",
                "Content-Disposition": "attachment; filename=invoice.exe",
                "List-Unsubscribe": "<https://evil.example/u>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
                "List-Id": "<other.example>", "Feedback-ID": "a:b:c:d", "Auto-Submitted": "auto-generated",
                "Precedence": "bulk"}


@pytest.fixture(scope="module")
def dnsfunc(dns_server):
    dns_server.set("pr1._domainkey.postroom.test", "TXT", PAIR.txt_value)
    return dnsfunc_for(dns_server)


def signed(**overrides) -> bytes:
    message = {"_id": "msg_1", "workspace_id": "w1", "kind": "transactional", "to": ["ann@x.test"],
               "subject": "Your receipt", "html": None, "text": "Thanks for your order.", "from_address":
               "news@postroom.test", "from_name": "News", "reply_to": "help@postroom.test", "track_opens": False,
               "track_clicks": False, "footer": False, **overrides}
    ctx = RenderContext(settings=SETTINGS, workspaces={"w1": {"_id": "w1", "name": "W"}},
                        signers={dkim.SHARED: SIGNER})
    return render_one(message, ctx)["data"].encode("utf-8")


def with_header(data: bytes, name: str, value: str) -> bytes:
    head, body = data.split(b"\r\n\r\n", 1)
    return head + f"\r\n{name}: {value}".encode() + b"\r\n\r\n" + body


def changed(data: bytes, name: str) -> bytes:
    """The message with the value of its (top-level) `name` header altered."""
    head, body = data.split(b"\r\n\r\n", 1)
    new_head, count = re.subn(rb"(?im)^(" + re.escape(name.encode()) + rb":[ \t]*)(\S)", rb"\1X\2", head, count=1)
    assert count == 1, f"{name} is not in the message"
    return new_head + b"\r\n\r\n" + body


def present(data: bytes) -> set[str]:
    head = data.split(b"\r\n\r\n", 1)[0].decode()
    return {line.split(":", 1)[0].lower() for line in head.split("\r\n") if line and line[0] not in " \t"}


@pytest.fixture(scope="module")
def single_part():
    return signed()


@pytest.fixture(scope="module")
def marketing():
    return signed(kind="campaign", campaign_id="camp-1", contact_id="c-1", html="<p>Sale</p>", text=None)


def test_mail_as_rendered_verifies_against_the_key_in_dns(dnsfunc, single_part, marketing):
    assert dkimpy.verify(single_part, dnsfunc=dnsfunc)
    assert dkimpy.verify(marketing, dnsfunc=dnsfunc)


def test_adding_any_header_a_receiver_relies_on_breaks_the_signature(dnsfunc, single_part, marketing):
    for data in (single_part, marketing):
        for name in RELIED_ON:
            assert not dkimpy.verify(with_header(data, name, ADDED_VALUES[name]), dnsfunc=dnsfunc), name


def test_changing_any_header_a_receiver_relies_on_breaks_the_signature(dnsfunc, single_part, marketing):
    for data in (single_part, marketing):
        relied_present = [name for name in RELIED_ON if name.lower() in present(data)]
        assert len(relied_present) >= 9
        for name in relied_present:
            assert not dkimpy.verify(changed(data, name), dnsfunc=dnsfunc), name


def test_the_transfer_encoding_of_single_part_mail_cannot_be_changed(dnsfunc, single_part):
    """A single-part message carries its Content-Transfer-Encoding at the top: switched to
    base64 or quoted-printable the same body would decode to something else."""
    assert b"\r\nContent-Transfer-Encoding: 7bit\r\n" in single_part
    for other in (b"base64", b"quoted-printable", b"8bit"):
        tampered = single_part.replace(b"Content-Transfer-Encoding: 7bit", b"Content-Transfer-Encoding: " + other)
        assert not dkimpy.verify(tampered, dnsfunc=dnsfunc), other


def test_a_header_outside_the_list_may_still_be_added_in_transit(dnsfunc, single_part):
    """Relays add trace fields (Received, Return-Path): those must not break it."""
    assert dkimpy.verify(with_header(single_part, "Received", "from relay.example by mx.example"),
                         dnsfunc=dnsfunc)
