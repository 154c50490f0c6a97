"""DKIM signatures made with our canonicalisation and `cryptography`'s RSA verify with
dkimpy, the reference implementation, against the published TXT record."""

import re

import dkim as dkimpy
import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.core.secret_box import seal
from pipelines.messages import dkim
from pipelines.messages.mime import compose

PAIR = dkim.generate_key_pair()
SIGNER = dkim.Signer("acme.example", "pr1",
                     serialization.load_pem_private_key(PAIR.private_pem.encode(), None))


def dns_for(domain="acme.example", selector="pr1", record=PAIR.txt_value):
    def lookup(name, timeout=5):
        return record.encode() if name == f"{selector}._domainkey.{domain}.".encode() else None
    return lookup


def message(**overrides):
    fields = dict(message_id="msg_1", from_address="news@acme.example", from_name="Acme Néws",
                  to=["bob@example.org"], subject="Hello   wörld", html="<p>Hi  there </p>\n\n",
                  text=None, reply_to="help@acme.example", id_domain="acme.example",
                  extra_headers={"List-Unsubscribe": "<https://u.example/x>",
                                 "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"})
    fields.update(overrides)
    return compose(**fields)


def test_a_signed_message_verifies_with_dkimpy_against_the_published_key():
    signed = SIGNER.sign(message())
    assert dkimpy.verify(signed, dnsfunc=dns_for())


def test_a_signer_sent_to_a_render_process_signs_exactly_as_the_original():
    import pickle
    copy = pickle.loads(pickle.dumps(SIGNER))
    assert (copy.domain, copy.selector) == ("acme.example", "pr1")
    assert copy.sign(message(), timestamp=1) == SIGNER.sign(message(), timestamp=1)
    assert dkimpy.verify(copy.sign(message()), dnsfunc=dns_for())


def test_the_signature_names_the_domain_selector_and_the_standard_headers():
    signed = SIGNER.sign(message())
    header = signed.split(b"\r\n\r\n")[0].decode()
    assert "d=acme.example;" in header and "s=pr1;" in header and "c=relaxed/relaxed;" in header
    h = re.search(r"h=([^;]*);", header).group(1)
    present = "from:to:subject:date:message-id:reply-to:mime-version:content-type:list-unsubscribe:" \
              "list-unsubscribe-post"
    assert re.sub(r"\s", "", h) == present + ":" + ":".join(n.lower() for n in dkim.SIGNED_HEADERS)
    assert all(len(line) <= 78 for line in header.split("\r\n")[:12])


def test_a_header_added_after_signing_breaks_the_signature():
    """Every signed header is named once more than it appears (oversigned), so a second
    From or Subject, or a List-Id added on the way, does not keep a valid signature."""
    signed = SIGNER.sign(message())
    assert dkimpy.verify(signed, dnsfunc=dns_for())
    for extra in (b"From: ceo@bank.example\r\n", b"Subject: Urgent\r\n", b"List-Id: <x.example>\r\n",
                  b"Feedback-ID: a:b:c:d\r\n"):
        head, body = signed.split(b"\r\n\r\n", 1)
        assert not dkimpy.verify(head + b"\r\n" + extra.rstrip(b"\r\n") + b"\r\n\r\n" + body, dnsfunc=dns_for())


def test_a_changed_body_or_subject_fails_verification():
    signed = SIGNER.sign(message(subject="Hello world"))
    assert not dkimpy.verify(signed.replace(b"Hi  there", b"Hi  thera"), dnsfunc=dns_for())
    assert not dkimpy.verify(signed.replace(b"Subject: Hello", b"Subject: Hallo"), dnsfunc=dns_for())


def test_another_key_in_dns_fails_verification():
    other = dkim.generate_key_pair()
    assert not dkimpy.verify(SIGNER.sign(message()), dnsfunc=dns_for(record=other.txt_value))


def test_relaxed_canonicalisation_tolerates_whitespace_changes_in_transit():
    signed = SIGNER.sign(message(text="line one\nline two"))
    head, body = signed.split(b"\r\n\r\n", 1)
    reflowed = head.replace(b"To: bob@example.org", b"To:   bob@example.org  ") + b"\r\n\r\n" \
        + body.replace(b"line one", b"line \t one") + b"\r\n\r\n"
    assert dkimpy.verify(reflowed, dnsfunc=dns_for())


@settings(max_examples=25, deadline=None)
@given(subject=st.text(min_size=1, max_size=120).filter(lambda s: s.strip()),
       body=st.text(max_size=400))
def test_any_subject_and_body_signs_verifiably(subject, body):
    data = message(subject=" ".join(subject.split()) or "x", html=None, text=body)
    assert dkimpy.verify(SIGNER.sign(data), dnsfunc=dns_for())


@settings(max_examples=300, deadline=None)
@given(body=st.lists(st.sampled_from([b"a", b"b c", b" ", b"\t", b"  \t ", b"\r\n", b"\n", b"\r", b"=", b"\xc3\xa9"]),
                     max_size=40).map(b"".join))
def test_body_canonicalisation_matches_dkimpy_on_any_whitespace(body):
    """Ours works on the whole body at once (fast); dkimpy's is the reference. Bodies end
    in CRLF as every body we compose does (an unterminated last line of blanks is where
    RFC 6376 leaves room and the two differ)."""
    from dkim.canonicalization import Relaxed
    body = body.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n") + b"\r\n"
    assert dkim.relaxed_body(body) == Relaxed.canonicalize_body(body)


def test_open_signer_unseals_the_stored_key():
    signer = dkim.open_signer("acme.example", "pr1", seal(PAIR.private_pem, "k1"), "k1")
    assert dkimpy.verify(signer.sign(message()), dnsfunc=dns_for())
    with pytest.raises(ValueError):
        dkim.open_signer("acme.example", "pr1", seal(PAIR.private_pem, "k1"), "another secret")


def test_signer_key_picks_the_custom_domain_or_the_shared_key():
    assert dkim.signer_key({"custom_domain": True, "workspace_id": "w", "signing_domain": "a.example"}) == "w:a.example"
    shared = {"custom_domain": False, "workspace_id": "w", "signing_domain": "postroom.test"}
    assert dkim.signer_key(shared) == dkim.SHARED


LINE_BREAKS = st.lists(st.sampled_from(["a", "é", " ", "\t", "\r", "\n", "\r\n", ".", "=", "x" * 90]),
                       max_size=60).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=LINE_BREAKS, html=LINE_BREAKS)
def test_what_compose_writes_ends_every_line_crlf_so_the_checks_may_be_skipped(text, html):
    """render_one signs (and the transport dot-stuffs) composed mail with `crlf_only`:
    whatever line breaks the caller's text holds, compose writes none bare, and the
    shortcut signs and stuffs exactly as the full check does."""
    from pipelines.adapters.smtp_client import _crlf_lines
    data = message(text=text or None, html=html or None)
    assert data.endswith(b"\r\n")
    assert data.count(b"\n") == data.count(b"\r\n") == data.count(b"\r")
    signed = SIGNER.sign(data, timestamp=7, crlf_only=True)
    assert signed == SIGNER.sign(data, timestamp=7)
    assert dkimpy.verify(signed, dnsfunc=dns_for())
    assert _crlf_lines(signed, crlf_only=True) == _crlf_lines(signed)
