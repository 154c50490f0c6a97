import base64
import re

from pipelines.core import secret_box
from pipelines.messages import links


def test_a_signed_token_verifies_only_for_its_purpose_and_secret():
    token = links.sign("unsubscribe", links.recipient_payload("w1", "c1", "a@b.c", "m1"), "s3cret")
    assert links.verify("unsubscribe", token, "s3cret") == {"w": "w1", "c": "c1", "e": "a@b.c", "m": "m1"}
    assert links.verify("open", token, "s3cret") is None
    assert links.verify("unsubscribe", token, "other") is None


def test_a_tampered_token_is_refused():
    token = links.sign("click", {"u": "https://example.com/a", "m": "m1"}, "k")
    for i in (0, len(token) // 2, len(token) - 1):
        flipped = token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1:]
        assert links.verify("click", flipped, "k") is None
    assert links.verify("click", token[:-4], "k") is None
    assert links.verify("click", "not-a-token", "k") is None
    assert links.verify("click", "", "k") is None


def test_a_token_reveals_neither_the_address_nor_the_ids_it_carries():
    payload = links.recipient_payload("ws-7d1f", "contact-93ab", "jane.doe@example.com", "msg_0c4e")
    token = links.sign("unsubscribe", payload, "s3cret")
    decoded = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    for secret in ("jane", "example.com", "ws-7d1f", "contact-93ab", "msg_0c4e"):
        assert secret.encode() not in decoded and secret not in token
    assert re.fullmatch(r"[A-Za-z0-9_-]+", token) and len(token) < 260
    assert links.sign("unsubscribe", payload, "s3cret") == token  # the same link for the same recipient


def test_sealed_secrets_open_only_with_the_same_key():
    sealed = secret_box.seal("whsec_abc", "key-one")
    assert "whsec_abc" not in sealed
    assert secret_box.open_sealed(sealed, "key-one") == "whsec_abc"
    try:
        secret_box.open_sealed(sealed, "key-two")
    except ValueError:
        pass
    else:
        raise AssertionError("opened with the wrong key")
