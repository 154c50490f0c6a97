"""The byte-template composer says what the stdlib's EmailMessage would: a receiver's
parser reads back the same headers and bodies, whatever the text."""

import email
import email.policy
import re
from email.header import decode_header, make_header

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.messages.mime import compose
from pipelines.templates.text import header_text


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
    assert all(len(line) <= 998 for line in data.split(b"\r\n"))  # SMTP's limit (7bit bodies may pass 78)
    assert b"\n" not in data.replace(b"\r\n", b"")
    msg = parse(data)
    assert msg.get_body(("plain",)).get_content().replace("\r\n", "\n").rstrip("\n") == text.rstrip("\n")
    assert msg.get_body(("html",)).get_content().replace("\r\n", "\n").rstrip("\n") == html.rstrip("\n")


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_any_subject_reads_back_normalised_in_lines_smtp_accepts(subject):
    """Plain subjects are written directly, the rest as encoded words: a reader cannot
    tell which, and reads the text with only white space folded and controls dropped."""
    data = build(subject=subject)
    head = data.split(b"\r\n\r\n", 1)[0]
    assert data.isascii() and all(len(line) <= 78 for line in head.split(b"\r\n"))
    msg = email.message_from_bytes(data, policy=email.policy.strict)
    assert msg["Subject"] == header_text(subject)
    assert sorted(msg.keys()) == sorted(HEADERS)


HEADERS = ["Message-ID", "Date", "To", "Subject", "From", "Reply-To", "MIME-Version", "Content-Type"]
INJECTION = "=?utf-8?q?Invoice=0D=0AX-Injected:_yes=0D=0AFrom:_ceo@bank.example?= 42"


def test_a_line_break_in_a_header_value_is_folded_not_a_new_header():
    msg = parse(build(subject="Hi\r\nBcc: evil@example.org", from_name="A\nB\u2028C\x00D"))
    assert msg["Subject"] == "Hi Bcc: evil@example.org" and msg["Bcc"] is None
    assert msg["From"].addresses[0].display_name == "A B CD"


def display_name(data: bytes) -> str:
    """The From display name as an RFC 2047 reader decodes it. (The stdlib's headerregistry
    keeps the folding white space between two encoded words of a phrase as a space, which
    RFC 2047 §6.2 says to drop; its `decode_header` follows the RFC, as mail clients do.)"""
    raw = email.message_from_bytes(data, policy=email.policy.compat32)["From"]
    if "<" not in raw:
        return ""
    phrase = raw.rsplit("<", 1)[0].strip()
    decoded = str(make_header(decode_header(phrase)))
    if decoded.startswith('"') and decoded.endswith('"'):  # a quoted string
        decoded = re.sub(r'\\(.)', r"\1", decoded[1:-1])
    return decoded


def test_encoded_words_written_by_a_caller_arrive_as_the_literal_text():
    data = build(subject=INJECTION, from_name=INJECTION)
    msg = email.message_from_bytes(data, policy=email.policy.strict)
    assert msg["Subject"] == INJECTION
    assert display_name(data) == msg["From"].addresses[0].display_name == INJECTION
    assert msg["X-Injected"] is None and len(msg.get_all("From")) == 1
    assert sorted(msg.keys()) == sorted(HEADERS)


def test_non_ascii_words_keep_the_spaces_between_them():
    for subject in ("שלום עולם", "Grüße  aus\tKöln", "日本語 の 件名 " * 8):
        assert parse(build(subject=subject))["Subject"] == header_text(subject)
    long_name = header_text("שלום עולם " * 10)
    assert display_name(build(from_name=long_name)) == long_name
    assert parse(build(from_name=long_name))["From"].addresses[0].display_name == long_name


def test_a_short_plain_subject_is_written_as_it_is():
    assert b"\r\nSubject: Your invoice 42\r\n" in build(subject="Your invoice 42")
    long = " ".join(["word"] * 30)
    data = build(subject=long)
    assert b"=?" not in data.split(b"\r\n\r\n")[0] and parse(data)["Subject"] == long


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_display_name_reads_back_normalised(name):
    """One encoded word for a name that needs encoding: read back alike by mail clients
    (RFC 2047) and by the stdlib's address parser, which keeps the space between two
    words of a phrase. Its line may pass 78 characters, never 998."""
    data = build(from_name=name)
    head = data.split(b"\r\n\r\n", 1)[0]
    assert data.isascii() and all(len(line) <= 998 for line in head.split(b"\r\n"))
    msg = email.message_from_bytes(data, policy=email.policy.strict)
    [address] = msg["From"].addresses
    assert address.addr_spec == "acme-1@postroom.test"
    assert display_name(data) == address.display_name == header_text(name)
    assert sorted(msg.keys()) == sorted(HEADERS)


def _parts(data: bytes) -> dict[str, tuple[str, str]]:
    """Each part's subtype → (its Content-Transfer-Encoding, its decoded text)."""
    return {p.get_content_subtype(): (p["Content-Transfer-Encoding"], p.get_content().replace("\r\n", "\n"))
            for p in parse(data).walk() if not p.is_multipart()}


def test_ascii_bodies_travel_unencoded_and_others_quoted_printable():
    html = '<table width="600"><tr><td class="x">Hi {name}</td></tr></table>\n' * 3
    parts = _parts(build(html=html, text="Hi there\n.a line starting with a dot"))
    assert parts["html"] == ("7bit", html) and parts["plain"][0] == "7bit"
    assert "=3D" not in build(html=html).decode()   # no quoted-printable inflation of every "="

    parts = _parts(build(html="<p>Grüße, José</p>", text="Grüße"))
    assert parts["html"] == ("quoted-printable", "<p>Grüße, José</p>\n")
    assert parts["plain"] == ("quoted-printable", "Grüße\n")


def test_a_line_longer_than_smtp_allows_or_the_boundary_itself_is_quoted_printable():
    long_line = "<p>" + "x" * 1200 + "</p>"
    data = build(html=long_line)
    assert all(len(line) <= 998 for line in data.split(b"\r\n"))
    assert _parts(data)["html"] == ("quoted-printable", long_line + "\n")

    boundary = parse(build()).get_boundary()
    sneaky = f"<p>--{boundary}</p>"   # a body holding the boundary would cut the message
    assert _parts(build(html=sneaky))["html"] == ("quoted-printable", sneaky + "\n")


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=127, blacklist_characters="\r"), max_size=3000))
def test_any_ascii_body_reads_back_with_no_line_past_998(html):
    data = build(html=html)
    assert all(len(line) <= 998 for line in data.split(b"\r\n"))
    assert parse(data).get_body(("html",)).get_content().replace("\r\n", "\n").rstrip("\n") == html.rstrip("\n")
