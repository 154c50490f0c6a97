"""Whatever a caller writes — subject, from_name, template data, a contact's names in a
personalised subject — the rendered message has exactly our header set, reads back with
the text as written (after the documented normalisation), parses under the stdlib's
strict policy, and its DKIM signature verifies with dkimpy."""

import email
import email.policy
from email.header import decode_header, make_header

import dkim as dkimpy
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.core.settings import Settings
from pipelines.messages import dkim
from pipelines.templates.personalise import stored_template_data
from pipelines.templates.render_message import RenderContext, render_one
from pipelines.templates.text import clean_subject, header_text

SETTINGS = Settings(secret_key="k", base_url="https://mail.example")
PAIR = dkim.generate_key_pair()
SIGNER = dkim.Signer("postroom.test", "pr1", serialization.load_pem_private_key(PAIR.private_pem.encode(), None))
INJECTION = "=?utf-8?q?Invoice=0D=0AX-Injected:_yes=0D=0AFrom:_ceo@bank.example?= 42"
BLANK_LINE = "=?utf-8?q?Hi=0D=0A=0D=0Anot_the_body?="

COMMON = {"DKIM-Signature", "Message-ID", "Date", "To", "Subject", "From", "MIME-Version", "Content-Type",
          "Feedback-ID"}
MARKETING = {"List-Id", "List-Unsubscribe", "List-Unsubscribe-Post"}


def dns(name, timeout=5):
    return PAIR.txt_value.encode() if name == b"pr1._domainkey.postroom.test." else None


# Text of every kind a header must survive: line breaks of all sorts, NUL and other
# controls, encoded-word look-alikes, non-ASCII scripts, very long words.
PIECES = st.sampled_from(["\r", "\n", "\r\n", "\x00", "\u2028", "\u2029", "\x85", "\t", "\x0b", "\x1b",
                          "=?", "?=", "=?utf-8?b?", "=0D=0A", INJECTION, BLANK_LINE, "X-Injected: yes",
                          "From: ceo@bank.example", "שלום עולם", "日本語", "Zoë", " ", "  ", "<b>", "&amp;",
                          "w" * 120, "ü" * 60])
TEXT = st.lists(st.one_of(PIECES, st.text(max_size=12)), max_size=8).map("".join)
# A lone surrogate (JSON can carry one) in fields that only reach headers.
HEADER_ONLY = st.lists(st.one_of(PIECES, st.just("\ud800"), st.text(max_size=12)), max_size=8).map("".join)
NO_BRACES = HEADER_ONLY.map(lambda t: t.replace("{", "(").replace("}", ")"))


def subject_read_back(msg) -> str:
    return str(msg["Subject"])


def display_name(data: bytes) -> str:
    """As an RFC 2047 reader decodes it (see tests/pipelines/test_mime.py::display_name)."""
    import re
    raw = email.message_from_bytes(data, policy=email.policy.compat32)["From"]
    if "<" not in raw:
        return ""
    decoded = str(make_header(decode_header(raw.rsplit("<", 1)[0].strip())))
    if decoded.startswith('"') and decoded.endswith('"'):
        decoded = re.sub(r"\\(.)", r"\1", decoded[1:-1])
    return decoded


def render(*, kind, subject, from_name, template_data, first_name, last_name, reply_to):
    message = {"_id": "msg_1", "workspace_id": "w1", "kind": kind, "to": ["ann@x.test"], "subject": subject,
               "html": "<p>Hi {{first_name}} {{detail}}</p>", "text": None, "from_address": "acme-1@postroom.test",
               "from_name": from_name, "reply_to": reply_to, "track_opens": kind == "campaign",
               "track_clicks": False, **stored_template_data(template_data), "signing_domain": "postroom.test",
               "campaign_id": "c1" if kind == "campaign" else None, "contact_id": "c-ann"}
    contact = {"_id": "c-ann", "workspace_id": "w1", "email": "ann@x.test", "first_name": first_name,
               "last_name": last_name}
    ctx = RenderContext(settings=SETTINGS, workspaces={"w1": {"_id": "w1", "name": "W"}},
                        contacts={("w1", "ann@x.test"): contact}, signers={dkim.SHARED: SIGNER})
    return render_one(message, ctx)["data"].encode("ascii")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["transactional", "campaign"]), prefix=NO_BRACES, from_name=HEADER_ONLY, detail=TEXT,
       first_name=TEXT, last_name=TEXT, reply_to=st.sampled_from([None, "help@acme.example"]))
def test_no_caller_text_adds_a_header_or_breaks_the_signature(kind, prefix, from_name, detail, first_name,
                                                              last_name, reply_to):
    subject = prefix + " {{first_name}} {{last_name}} {{detail}}"
    data = render(kind=kind, subject=subject, from_name=from_name, template_data={"detail": detail},
                  first_name=first_name, last_name=last_name, reply_to=reply_to)

    head = data.split(b"\r\n\r\n", 1)[0]
    assert all(len(line) <= 998 for line in head.split(b"\r\n"))
    for name, value in dkim.split_message(data)[0]:
        if name == b"Subject":  # caller text, folded to 78 (a long display name is one word: ≤ 998)
            assert all(len(line) <= 78 for line in (name + b":" + value).split(b"\r\n")), value
    msg = email.message_from_bytes(data, policy=email.policy.strict)
    expected = COMMON | (MARKETING if kind == "campaign" else set()) | ({"Reply-To"} if reply_to else set())
    assert sorted(msg.keys()) == sorted(expected)  # each once: no extra From, no X-Injected
    assert all(not msg[name].defects for name in msg.keys())
    assert subject_read_back(msg) == clean_subject(f"{prefix} {first_name} {last_name} {detail}")
    assert msg["From"].addresses[0].addr_spec == "acme-1@postroom.test"
    assert display_name(data) == msg["From"].addresses[0].display_name == header_text(from_name)
    assert msg.get_body(("html",)) is not None
    assert dkimpy.verify(data, dnsfunc=dns)


def test_the_issues_injection_through_each_field_arrives_as_text():
    for expected, fields in (
            (INJECTION, {"subject": INJECTION, "template_data": {}, "first_name": "Ann"}),
            (INJECTION, {"subject": "{{detail}}", "template_data": {"detail": INJECTION}, "first_name": "Ann"}),
            ("Hi " + INJECTION, {"subject": "Hi {{first_name}}", "template_data": {}, "first_name": INJECTION}),
            (BLANK_LINE, {"subject": BLANK_LINE, "template_data": {}, "first_name": "Ann"})):
        data = render(kind="campaign", from_name=INJECTION, last_name="", reply_to=None, **fields)
        msg = email.message_from_bytes(data, policy=email.policy.strict)
        assert msg["X-Injected"] is None and len(msg.get_all("From")) == 1
        assert str(msg["Subject"]) == expected
        assert display_name(data) == msg["From"].addresses[0].display_name == INJECTION
        assert "Hi" in msg.get_body(("html",)).get_content()  # the body was not cut off by a blank line
        assert dkimpy.verify(data, dnsfunc=dns)
