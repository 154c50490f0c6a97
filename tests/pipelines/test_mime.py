"""The byte-template composer says what the stdlib's EmailMessage would: a receiver's
parser reads back the same headers and bodies, whatever the text."""

import email
import email.policy
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.mime import compose


def parse(data: bytes):
    return email.message_from_bytes(data, policy=email.policy.default)


def build(**overrides):
    fields = dict(message_id="msg_1", from_address="acme-1@postroom.test", from_name="Acme",
                  to=["bob@example.org"], subject="Hello", html="<p>Hi</p>", text=None,
                  reply_to="support@acme.example", id_domain="postroom.test")
    fields.update(overrides)
    return compose(**fields)


def test_headers_read_back_as_given():
    msg = parse(build(to=["a@example.org", "b@example.org"], extra_headers={"List-Unsubscribe": "<https://x/u>"}))
    assert msg["Message-ID"] == "<msg_1@postroom.test>"
    assert msg["From"] == "Acme <acme-1@postroom.test>"
    assert msg["To"] == "a@example.org, b@example.org"
    assert msg["Reply-To"] == "support@acme.example"
    assert msg["Subject"] == "Hello"
    assert msg["List-Unsubscribe"] == "<https://x/u>"
    assert msg["Date"] and msg["MIME-Version"] == "1.0"
    assert msg.get_content_type() == "multipart/alternative"


def test_non_ascii_subject_and_name_are_encoded_words_and_read_back():
    data = build(subject="Grüße aus Köln — 50 % Rabatt", from_name="Zoë & Co")
    assert data.isascii()
    msg = parse(data)
    assert msg["Subject"] == "Grüße aus Köln — 50 % Rabatt"
    assert msg["From"].startswith("Zoë & Co") or msg["From"].startswith('"Zoë & Co"')


def test_each_message_gets_its_own_recipient_and_id_from_a_shared_template():
    first, second = parse(build(message_id="msg_a", to=["a@example.org"])), parse(
        build(message_id="msg_b", to=["b@example.org"], html="<p>Other</p>"))
    assert (first["To"], second["To"]) == ("a@example.org", "b@example.org")
    assert second["Message-ID"] == "<msg_b@postroom.test>"
    assert "Other" in second.get_body(("html",)).get_content()


def test_text_only_message_is_a_single_plain_part():
    msg = parse(build(html=None, text="just text\n"))
    assert msg.get_content_type() == "text/plain"
    assert msg.get_content().replace("\r\n", "\n") == "just text\n"


def test_html_only_message_gets_a_plain_alternative():
    msg = parse(build(html="<p>Hello <b>there</b></p>"))
    assert "Hello there" in msg.get_body(("plain",)).get_content()


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\x00"),
               max_size=400),
       st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\x00"),
               max_size=400))
def test_any_body_text_survives_the_round_trip_in_lines_smtp_accepts(text, html):
    data = build(text=text, html=html)
    assert data.isascii()
    assert all(len(line) <= 78 for line in data.split(b"\r\n"))
    assert b"\n" not in data.replace(b"\r\n", b"")
    msg = parse(data)
    assert msg.get_body(("plain",)).get_content().replace("\r\n", "\n").rstrip("\n") == text.rstrip("\n")
    assert msg.get_body(("html",)).get_content().replace("\r\n", "\n").rstrip("\n") == html.rstrip("\n")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=150)
       .filter(lambda s: s.strip() and s == s.strip()))
def test_any_subject_reads_back_as_given_in_lines_smtp_accepts(subject):
    """Short plain subjects are written directly, the rest through the stdlib: a reader
    cannot tell which. (Subjects arrive stripped: pipelines.text.clean_subject.)"""
    data = build(subject=subject)
    assert data.isascii() and all(len(line) <= 78 for line in data.split(b"\r\n")[:12])
    assert parse(data)["Subject"] == subject


def test_a_header_value_with_a_line_break_is_refused():
    import pytest
    with pytest.raises(ValueError):
        build(subject="Hi\r\nBcc: evil@example.org")


def test_composing_from_a_shared_template_is_far_cheaper_than_a_fresh_email_message():
    """Not a timing assertion on the machine's speed: both are measured here, side by side."""
    from email.message import EmailMessage
    from email.policy import SMTP
    html = "<p>Hello {}</p>" + "<p>" + "lorem ipsum dolor sit amet " * 700 + "</p>"
    start = time.perf_counter()
    for i in range(50):
        build(message_id=f"m{i}", to=[f"u{i}@example.org"], html=html.format(i), text="x")
    ours = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(50):
        msg = EmailMessage(policy=SMTP)
        msg["From"], msg["To"], msg["Subject"] = "a@example.org", f"u{i}@example.org", "Hello"
        msg.set_content("x", subtype="plain", charset="utf-8", cte="quoted-printable")
        msg.add_alternative(html.format(i), subtype="html", charset="utf-8", cte="quoted-printable")
        msg.as_bytes()
    stdlib = time.perf_counter() - start
    assert ours < stdlib / 3
