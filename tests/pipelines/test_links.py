from pipelines import links, secret_box


def test_a_signed_token_verifies_only_for_its_purpose_and_secret():
    token = links.sign("unsubscribe", links.recipient_payload("w1", "c1", "a@b.c", "m1"), "s3cret")
    assert links.verify("unsubscribe", token, "s3cret") == {"w": "w1", "c": "c1", "e": "a@b.c", "m": "m1"}
    assert links.verify("open", token, "s3cret") is None
    assert links.verify("unsubscribe", token, "other") is None


def test_a_tampered_token_is_refused():
    token = links.sign("click", {"u": "https://example.com/a", "m": "m1"}, "k")
    body, mac = token.split(".")
    forged = links.sign("click", {"u": "https://evil.example/", "m": "m1"}, "k").split(".")[0] + "." + mac
    assert links.verify("click", forged, "k") is None
    assert links.verify("click", body + ".AAAA", "k") is None
    assert links.verify("click", "not-a-token", "k") is None


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
