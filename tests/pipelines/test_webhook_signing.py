"""Signatures as a receiver sees them: the README's helper accepts what we sign and
refuses anything tampered with, stale or malformed."""

import hashlib
import hmac
import json
import time

from hypothesis import given
from hypothesis import strategies as st

from pipelines.webhooks import signing
from tests.support.http_receiver import readme_verifier

verify_signature = readme_verifier()


def test_signature_is_hex_hmac_sha256_of_timestamp_dot_body():
    body = signing.encode_payload("contact.created", "2026-01-02T03:04:05.000000Z", {"id": "c1"})
    header = signing.signature_header("whsec_abc", body, 1700000000)
    expected = hmac.new(b"whsec_abc", b"1700000000." + body.encode(), hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"


def test_payload_is_compact_json_with_event_timestamp_and_data():
    body = signing.encode_payload("email.sent", "2026-01-02T03:04:05.000000Z", {"to": ["zoë@example.org"]})
    assert json.loads(body) == {"event": "email.sent", "timestamp": "2026-01-02T03:04:05.000000Z",
                                "data": {"to": ["zoë@example.org"]}}
    assert ", " not in body and ": " not in body


def test_secrets_are_prefixed_random_and_distinct():
    first, second = signing.new_secret(), signing.new_secret()
    assert first.startswith("whsec_") and len(first) == len("whsec_") + 43
    assert first != second


@given(body=st.binary(max_size=2000), secret=st.text(min_size=1, max_size=60))
def test_readme_helper_accepts_exactly_what_we_sign(body, secret):
    now = int(time.time())
    header = signing.signature_header(secret, body, now)
    assert verify_signature(secret, header, body)
    assert signing.verify(secret, header, body, now=now)
    assert not verify_signature(secret, header, body + b" ")
    assert not verify_signature(secret + "x", header, body)


def test_readme_helper_refuses_a_stale_or_future_timestamp():
    body = b'{"event":"contact.created"}'
    old = int(time.time()) - 301
    assert not verify_signature("whsec_s", signing.signature_header("whsec_s", body, old), body)
    future = int(time.time()) + 301
    assert not verify_signature("whsec_s", signing.signature_header("whsec_s", body, future), body)
    recent = int(time.time()) - 290
    assert verify_signature("whsec_s", signing.signature_header("whsec_s", body, recent), body)


def test_readme_helper_refuses_malformed_headers():
    body = b"{}"
    for header in ("", "garbage", "t=abc,v1=00", "v1=00", "t=1700000000", "t=,v1="):
        assert not verify_signature("whsec_s", header, body)
        assert not signing.verify("whsec_s", header, body, now=time.time())


def test_delivery_headers_name_event_delivery_and_webhook():
    headers = signing.delivery_headers(secret="whsec_s", body="{}", timestamp=5, event="list.member_added",
                                       delivery_id="ev1:wh1", webhook_id="wh1")
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Service-Event"] == "list.member_added"
    assert headers["X-Service-Delivery-Id"] == "ev1:wh1"
    assert headers["X-Service-Webhook-Id"] == "wh1"
    assert headers["X-Service-Signature"].startswith("t=5,v1=")
