"""Addresses: stored as the client wrote them, sent in A-labels, matched across spellings,
and written into To: as plain addresses (never encoded words)."""

import email
import email.policy

import pytest

from pipelines.audience.addresses import match_key, normalize, wire_form
from pipelines.messages.mime import compose


def test_the_stored_form_keeps_the_spelling_the_client_chose_with_the_domain_lower_cased():
    assert normalize("user@xn--bcher-kva.example") == "user@xn--bcher-kva.example"
    assert normalize("user@XN--BCHER-KVA.Example") == "user@xn--bcher-kva.example"
    assert normalize("Kunde@BÜCHER.example") == "Kunde@bücher.example"
    assert normalize("jürgen@Example.COM") == "jürgen@example.com"


def test_the_wire_form_puts_the_domain_in_a_labels_and_leaves_the_local_part_alone():
    assert wire_form("kunde@bücher.example") == "kunde@xn--bcher-kva.example"
    assert wire_form("user@xn--bcher-kva.example") == "user@xn--bcher-kva.example"
    assert wire_form("jürgen@example.com") == "jürgen@example.com"  # only SMTPUTF8 can carry it


@pytest.mark.parametrize("address", ["a@b☃.example", "x@example.org\r\nRCPT TO:<v@example.org>",
                                     "a b@example.org", "a@example.org>"])
def test_what_cannot_go_on_the_wire_is_refused(address):
    with pytest.raises(ValueError):
        wire_form(address)


def test_both_spellings_of_one_mailbox_match():
    assert match_key("Kunde@xn--bcher-kva.example") == match_key("kunde@bücher.example") == "kunde@bücher.example"
    assert match_key("Reader@Example.org") == "reader@example.org"
    assert match_key("not an address") == "not an address"


def received_to(to: list[str]) -> tuple[bytes, str]:
    data = compose(message_id="m1", from_address="a@postroom.test", from_name=None, to=to, subject="Hi",
                   html=None, text="x", reply_to=None, id_domain="postroom.test")
    header = next(line for line in data.split(b"\r\n") if line.startswith(b"To: "))
    return header, email.message_from_bytes(data, policy=email.policy.default)["To"]


def test_to_carries_a_labels_and_no_encoded_word():
    header, parsed = received_to(["kunde@bücher.example", "user@xn--bcher-kva.example"])
    assert header == b"To: kunde@xn--bcher-kva.example, user@xn--bcher-kva.example"
    assert parsed == "kunde@xn--bcher-kva.example, user@xn--bcher-kva.example"


def test_a_non_ascii_local_part_is_written_as_utf8_for_an_smtputf8_message():
    header, parsed = received_to(["jürgen@bücher.example"])
    assert header == "To: jürgen@xn--bcher-kva.example".encode() and b"=?" not in header
    assert parsed == "jürgen@xn--bcher-kva.example"


def test_a_long_list_folds_between_addresses():
    to = [f"reader-{i:02d}@example.org" for i in range(50)]
    data = compose(message_id="m1", from_address="a@postroom.test", from_name=None, to=to, subject="Hi",
                   html=None, text="x", reply_to=None, id_domain="postroom.test")
    assert all(len(line) <= 998 for line in data.split(b"\r\n"))
    assert email.message_from_bytes(data, policy=email.policy.default)["To"] == ", ".join(to)


def test_an_smtputf8_message_signs_verifiably():
    import dkim as dkimpy
    from cryptography.hazmat.primitives import serialization

    from pipelines.messages import dkim

    pair = dkim.generate_key_pair()
    signer = dkim.Signer("acme.example", "pr1", serialization.load_pem_private_key(pair.private_pem.encode(), None))
    data = compose(message_id="m1", from_address="news@acme.example", from_name=None, to=["jürgen@bücher.example"],
                   subject="Hi", html="<p>Hi</p>", text=None, reply_to=None, id_domain="acme.example")
    signed = signer.sign(data)

    def dns(name, timeout=5):
        return pair.txt_value.encode() if name == b"pr1._domainkey.acme.example." else None
    assert dkimpy.verify(signed, dnsfunc=dns)
