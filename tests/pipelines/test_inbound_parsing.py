"""A received message read field by field (pipelines/inbound/parsing.py), on messages made
here: what a customer's app would show and rely on — who wrote, to whom, the text, the
reply, the files — and what happens to hostile or broken mail."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from email.message import EmailMessage

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.inbound.parsing import MAX_HEADERS, MAX_NESTING, InboundRefusal, parse_inbound, refusal_for

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAAB"
                       "JRU5ErkJggg==")


def crlf(text: str) -> bytes:
    return text.replace("\n", "\r\n").encode("utf-8")


ALTERNATIVE = crlf("""\
From: =?utf-8?q?Ann_=C3=85berg?= <ann@sender.example>
To: Support <support@inbound.example>, bob@inbound.example
Cc: "Carl, Jr." <carl@other.example>
Reply-To: replies@sender.example
Subject: Re: Order #42
Date: Tue, 02 Jan 2024 09:30:00 +0100
Message-ID: <reply-1@sender.example>
In-Reply-To: <orig-1@inbound.example>
References: <start@inbound.example>
 <orig-1@inbound.example>
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=utf-8

Thanks, the parcel arrived.

On Mon, Jan 1, 2024 at 10:00 AM Support <support@inbound.example> wrote:
> Your order #42 has shipped.
> Track it at https://track.example/42
--alt
Content-Type: text/html; charset=utf-8

<p onclick="steal()">Thanks, the parcel arrived.</p><script>steal()</script>
<a href="javascript:steal()">track</a><img src="cid:logo">
<blockquote>Your order #42 has shipped.</blockquote>
--alt--
""")


def test_a_reply_in_text_and_html_is_read_field_by_field():
    parsed = parse_inbound(ALTERNATIVE)
    assert parsed["from"] == {"address": "ann@sender.example", "name": "Ann Åberg"}
    assert parsed["to"] == [{"address": "support@inbound.example", "name": "Support"},
                            {"address": "bob@inbound.example", "name": None}]
    assert parsed["cc"] == [{"address": "carl@other.example", "name": "Carl, Jr."}]
    assert parsed["reply_to"] == [{"address": "replies@sender.example", "name": None}]
    assert parsed["subject"] == "Re: Order #42"
    assert parsed["date"] == "2024-01-02T09:30:00+01:00"
    assert parsed["message_id"] == "<reply-1@sender.example>"
    assert parsed["in_reply_to"] == "<orig-1@inbound.example>"
    assert parsed["references"] == ["<start@inbound.example>", "<orig-1@inbound.example>"]
    assert parsed["text"].startswith("Thanks, the parcel arrived.\n\nOn Mon, Jan 1, 2024")
    assert parsed["reply"] == "Thanks, the parcel arrived."
    assert "<script>" in parsed["html"]
    assert parsed["attachments"] == [] and parsed["auto_submitted"] is False and parsed["problems"] == []
    json.dumps(parsed)  # JSON-ready as it is


def test_an_address_shown_as_a_display_name_is_a_name_not_the_sender():
    raw = crlf("From: ceo@bank.example <thief@evil.example>\nTo: a@x.example <b@y.example>, c@z.example\n\nPay now.\n")
    parsed = parse_inbound(raw)
    assert parsed["from"] == {"address": "thief@evil.example", "name": "ceo@bank.example"}
    assert parsed["to"] == [{"address": "b@y.example", "name": "a@x.example"}, {"address": "c@z.example", "name": None}]


def test_the_sanitised_html_keeps_the_content_and_drops_what_runs():
    safe = parse_inbound(ALTERNATIVE)["html_sanitised"]
    assert "Thanks, the parcel arrived." in safe and 'src="cid:logo"' in safe
    for gone in ("<script", "steal()", "onclick", "javascript:"):
        assert gone not in safe


def test_every_header_is_listed_decoded_in_order():
    headers = parse_inbound(ALTERNATIVE)["headers"]
    assert [name for name, _ in headers] == ["From", "To", "Cc", "Reply-To", "Subject", "Date", "Message-ID",
                                              "In-Reply-To", "References", "MIME-Version", "Content-Type"]
    assert headers[0] == ["From", "Ann Åberg <ann@sender.example>"]
    assert headers[8] == ["References", "<start@inbound.example> <orig-1@inbound.example>"]


def test_the_reply_of_html_only_mail_leaves_the_quoted_thread_out():
    raw = crlf("""\
From: ann@sender.example
Content-Type: text/html; charset=utf-8

<div>Yes, Thursday works.</div><div><br></div><div class="gmail_quote">On Mon, Bob wrote:<br>
<blockquote>Shall we meet on Thursday?</blockquote></div>
""")
    parsed = parse_inbound(raw)
    assert parsed["text"] is None
    assert "Yes, Thursday works." in parsed["reply"] and "Shall we meet" not in parsed["reply"]


def with_files() -> bytes:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "ann@sender.example", "in@inbound.example", "Files"
    message.set_content("See the files.")
    message.add_alternative('<p>See the logo: <img src="cid:logo@sender.example"></p>', subtype="html")
    message.get_payload()[1].add_related(PNG, "image", "png", cid="<logo@sender.example>", filename="logo.png",
                                             disposition="inline")
    message.add_attachment(b"%PDF-1.4 fake invoice", maintype="application", subtype="pdf", filename="invoice.pdf")
    message.add_attachment(b"x" * 5000, maintype="application", subtype="octet-stream", filename="big.bin")
    return message.as_bytes()


def test_files_are_described_with_their_bytes_when_small_enough():
    parsed = parse_inbound(with_files(), max_attachment_inline_bytes=1024)
    logo, invoice, big = parsed["attachments"]
    assert logo == {"filename": "logo.png", "content_type": "image/png", "size": len(PNG),
                    "content_id": "logo@sender.example", "disposition": "inline",
                    "content_b64": base64.b64encode(PNG).decode(), "sha256": hashlib.sha256(PNG).hexdigest()}
    assert invoice["filename"] == "invoice.pdf" and invoice["disposition"] == "attachment"
    assert base64.b64decode(invoice["content_b64"]) == b"%PDF-1.4 fake invoice"
    assert big["size"] == 5000 and "content_b64" not in big  # over the inline limit: described only
    assert big["sha256"] == hashlib.sha256(b"x" * 5000).hexdigest()
    assert parsed["text"].strip() == "See the files." and "cid:logo@sender.example" in parsed["html_sanitised"]


def test_an_archive_is_described_never_expanded():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("zeros.txt", b"\0" * 10_000_000)  # 10 MB of zeros: ~10 KB compressed
    zipped = buffer.getvalue()
    message = EmailMessage()
    message["From"] = "ann@sender.example"
    message.set_content("A bomb.")
    message.add_attachment(zipped, maintype="application", subtype="zip", filename="report.zip")
    (attachment,) = parse_inbound(message.as_bytes())["attachments"]
    assert attachment["content_type"] == "application/zip" and attachment["size"] == len(zipped) < 100_000
    assert attachment["sha256"] == hashlib.sha256(zipped).hexdigest()


@pytest.mark.parametrize(("given", "expected"), [
    ("../../etc/passwd", "passwd"), ("C:\\Users\\evil\\run.exe", "run.exe"), ("..", "attachment.bin"),
    ("=?utf-8?b?UmVjaG51bmcgTsKwIDEucGRm?=", "Rechnung N° 1.pdf"), ("=?utf-8?q?a=00b=0D=0Ac.txt?=", "ab c.txt"),
    (".hidden", "hidden"),
])
def test_file_names_lose_paths_and_control_characters(given, expected):
    raw = crlf(f"""\
From: a@sender.example
Content-Type: multipart/mixed; boundary=b

--b
Content-Type: text/plain

hi
--b
Content-Type: application/octet-stream
Content-Disposition: attachment; filename="{given}"

data
--b--
""")
    assert parse_inbound(raw)["attachments"][0]["filename"] == expected


def test_raw_8bit_in_a_part_header_gives_clean_text():
    raw = (b"From: a@sender.example\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
           b"Content-Type: image/p\xe9ng; name=\"caf\xe9.png\"\r\nContent-ID: <\xff@x>\r\n\r\ndata\r\n--b--\r\n")
    (attachment,) = parse_inbound(raw)["attachments"]
    assert attachment["content_type"] == "application/octet-stream" and attachment["filename"] == "café.png"
    json.dumps(attachment, ensure_ascii=False).encode("utf-8")


def test_an_rfc_2231_file_name_is_decoded():
    raw = crlf("""\
From: a@sender.example
Content-Type: multipart/mixed; boundary=b

--b
Content-Type: application/pdf
Content-Disposition: attachment; filename*=utf-8''%C3%BCbersicht%202024.pdf

data
--b--
""")
    assert parse_inbound(raw)["attachments"][0]["filename"] == "übersicht 2024.pdf"


def test_an_attached_message_is_a_file_and_its_body_is_not_taken_for_the_message():
    raw = crlf("""\
From: a@sender.example
Content-Type: multipart/mixed; boundary=b

--b
Content-Type: text/plain

Forwarding this.
--b
Content-Type: message/rfc822

From: someone@else.example
Subject: inner

The inner body.
--b--
""")
    parsed = parse_inbound(raw)
    assert parsed["text"].strip() == "Forwarding this."
    (attached,) = parsed["attachments"]
    assert attached["content_type"] == "message/rfc822" and attached["filename"] == "attachment.eml"
    assert b"The inner body." in base64.b64decode(attached["content_b64"])


@pytest.mark.parametrize(("encoded", "decoded"), [
    ("=?utf-8?q?Caf=C3=A9_cr=C3=A8me?=", "Café crème"),
    ("=?iso-8859-1?q?R=E9union_=E0_Z=FCrich?=", "Réunion à Zürich"),
    ("=?windows-1252?b?k0JvbmpvdXKU?=", "“Bonjour”"),
    ("=?koi8-r?b?8NLJ18XU?=", "Привет"),
    ("=?iso-2022-jp?b?GyRCJDMkcyRLJEEkTxsoQg==?=", "こんにちは"),
    ("=?gb2312?b?1tDOxA==?=", "中文"),
    ("=?GB2312?B?x7A=?= =?utf-8?q?_and_more?=", "前 and more"),  # adjacent encoded words join without the space
    ("=?utf-8?q?broken_=E2=82?=", "broken \ufffd"),  # a cut UTF-8 sequence: replaced, not fatal
])
def test_encoded_words_in_several_charsets(encoded, decoded):
    parsed = parse_inbound(crlf(f"From: a@sender.example\nSubject: {encoded}\n\nbody\n"))
    assert parsed["subject"] == decoded


def test_an_unknown_charset_is_read_as_utf8_and_said():
    raw = crlf("From: a@sender.example\nSubject: =?x-made-up?q?caf=C3=A9?=\nContent-Type: text/plain; "
               "charset=x-made-up\n\ncrème brûlée\n")
    parsed = parse_inbound(raw)
    assert parsed["subject"] == "café" and parsed["text"].strip() == "crème brûlée"
    assert "part 1: unknown charset 'x-made-up'" in parsed["problems"]


@pytest.mark.parametrize("charset", ["unicode_escape", "raw_unicode_escape", "utf-7"])
def test_a_charset_label_that_makes_lone_surrogates_gives_replacement_characters(charset):
    body = b"+2AA-" if charset == "utf-7" else b"\\ud800 x"
    raw = b"From: a@sender.example\r\nSubject: =?" + charset.encode() + b"?q?" + body.replace(b"\\", b"=5C") \
        + b"?=\r\nContent-Type: text/plain; charset=" + charset.encode() + b"\r\n\r\n" + body + b"\r\n"
    parsed = parse_inbound(raw)
    json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    assert "\ufffd" in parsed["text"]


def test_a_wrong_charset_falls_back_and_is_said():
    raw = b"From: a@sender.example\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nna\xc3\xafve\r\n"
    parsed = parse_inbound(raw)
    assert parsed["text"].strip() == "naïve" and parsed["problems"] == [
        "part 1: text is not valid us-ascii", "no Date header", "no Message-ID header"]


def test_eight_bit_without_a_declared_charset():
    utf8 = b"From: =?utf-8?q?x?= <a@sender.example>\r\nSubject: Gr\xc3\xbc\xc3\x9fe\r\n\r\nSch\xc3\xb6n\r\n"
    latin = b"From: a@sender.example\r\nSubject: Gr\xfc\xdfe\r\n\r\nSch\xf6n\r\n"
    for raw in (utf8, latin):
        parsed = parse_inbound(raw)
        assert parsed["subject"] == "Grüße" and parsed["text"].strip() == "Schön"
    assert "part 1: 8-bit text without a charset (read as Windows-1252)" in parse_inbound(latin)["problems"]


def test_bare_lf_reads_as_crlf_does():
    assert parse_inbound(ALTERNATIVE.replace(b"\r\n", b"\n")) == parse_inbound(ALTERNATIVE)


def test_missing_headers_leave_fields_empty_and_are_said():
    parsed = parse_inbound(b"\r\nJust a body.\r\n")
    assert parsed["from"] is None and parsed["to"] == [] and parsed["subject"] == ""
    assert parsed["date"] is None and parsed["message_id"] is None and parsed["references"] == []
    assert parsed["text"].strip() == "Just a body."
    assert parsed["problems"] == ["no From header", "no Date header", "no Message-ID header"]


def test_an_unreadable_date_is_none_and_a_date_without_zone_is_utc():
    assert parse_inbound(b"Date: next Tuesday\r\n\r\n")["date"] is None
    assert parse_inbound(b"Date: Tue, 02 Jan 2024 09:30:00 -0000\r\n\r\n")["date"] == "2024-01-02T09:30:00+00:00"


@pytest.mark.parametrize("subject", [
    "=?utf-8?q?Hello=0D=0ABcc:_victim@example.org?=", "=?utf-8?b?SGVsbG8NCkJjYzogdmljdGltQGV4YW1wbGUub3Jn?=",
    "=?utf-8?q?Hello=00=0ABcc:_victim@example.org?=",
])
def test_decoded_values_never_carry_cr_lf_or_nul(subject):
    raw = crlf(f"From: =?utf-8?q?Ann=0D=0AX-Evil=3A_1?= <a@sender.example>\nSubject: {subject}\n\nbody\n")
    parsed = parse_inbound(raw)
    assert parsed["subject"] == "Hello Bcc: victim@example.org"
    assert parsed["from"] == {"address": "a@sender.example", "name": "Ann X-Evil: 1"}
    for _name, value in parsed["headers"]:
        assert not {"\r", "\n", "\0"} & set(value)


@pytest.mark.parametrize(("headers", "automatic"), [
    ("Auto-Submitted: auto-replied", True), ("Auto-Submitted: no", False), ("X-Autoreply: yes", True),
    ("X-Autorespond: vacation", True), ("Precedence: bulk", True), ("Precedence: auto_reply", True),
    ("Precedence: junk", True), ("Subject: Out of Office: back Monday", True),
    ("Subject: Automatic reply: Your order", True), ("Subject: Abwesenheitsnotiz: Urlaub", True),
    ("Subject: Réponse automatique : absent", True), ("Return-Path: <>", True),
    ("Content-Type: multipart/report; report-type=delivery-status; boundary=x", True),
    ("Subject: Re: the office party", False), ("Precedence: normal", False),
    ("Sender: MAILER-DAEMON@mx.example", True), ("Sender: owner-announce@lists.example", True),
    ("Sender: no-reply@shop.example", True), ("Subject: failure notice", True),
    ("Subject: Returned mail: see transcript for details", True), ("Subject: Undeliverable: Order", True),
])
def test_automatic_messages_are_marked_so_nothing_answers_them(headers, automatic):
    raw = crlf(f"From: a@sender.example\n{headers}\n\nbody\n")
    assert parse_inbound(raw)["auto_submitted"] is automatic


def nested(levels: int) -> bytes:
    """`levels` multiparts one in another, the text in the innermost."""
    inner = levels - 1
    opening = "".join(f"--b{n}\nContent-Type: multipart/mixed; boundary=b{n + 1}\n\n" for n in range(inner))
    closing = "".join(f"--b{n}--\n" for n in reversed(range(inner + 1)))
    return crlf(f"From: a@sender.example\nContent-Type: multipart/mixed; boundary=b0\n\n{opening}"
                f"--b{inner}\nContent-Type: text/plain\n\ndeep text\n{closing}")


def test_nesting_up_to_the_limit_is_accepted_and_deeper_refused():
    assert refusal_for(nested(MAX_NESTING)) is None
    assert parse_inbound(nested(MAX_NESTING))["text"].strip() == "deep text"
    refusal = refusal_for(nested(MAX_NESTING + 5))
    assert isinstance(refusal, InboundRefusal) and refusal.code == 554
    assert refusal.text == f"5.6.0 MIME nesting too deep ({MAX_NESTING + 5} levels; at most {MAX_NESTING})"


def test_nesting_deeper_than_python_can_recurse_is_refused_and_still_parses_without_raising():
    hostile = nested(1500)
    assert refusal_for(hostile).text.startswith("5.6.0 MIME nesting too deep")
    parsed = parse_inbound(hostile)
    assert parsed["from"] == {"address": "a@sender.example", "name": None}  # the headers are still read
    assert parsed["text"] is None and parsed["problems"][-1] == "message body could not be read: RecursionError"


def test_five_thousand_headers_are_refused_with_the_reason():
    raw = b"".join(b"X-Filler-%d: v\r\n" % n for n in range(5000)) + b"From: a@sender.example\r\n\r\nbody\r\n"
    refusal = refusal_for(raw)
    assert (refusal.code, refusal.text) == (552, f"5.6.0 Too many header fields (5001; at most {MAX_HEADERS})")
    assert parse_inbound(raw)["from"] == {"address": "a@sender.example", "name": None}


def test_too_many_parts_are_refused():
    parts = "".join("--b\nContent-Type: text/plain\n\nx\n" for _ in range(600))
    refusal = refusal_for(crlf(f"From: a@sender.example\nContent-Type: multipart/mixed; boundary=b\n\n{parts}--b--\n"))
    assert refusal.code == 552 and refusal.text.startswith("5.6.0 Too many MIME parts (601;")


def test_a_file_that_is_not_a_message_is_refused():
    refusal = refusal_for(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\x00\x00\x00" * 50)  # an Outlook .msg
    assert refusal.code == 554 and "NUL bytes in the header" in refusal.text


def test_a_well_formed_message_is_not_refused():
    assert refusal_for(ALTERNATIVE) is None and refusal_for(with_files()) is None


def test_malformed_mime_is_parsed_and_its_defects_listed():
    raw = crlf("""\
From: a@sender.example
Content-Type: multipart/mixed; boundary=b

--b
Content-Type: text/plain

first part
--b
Content-Type: application/pdf
Content-Transfer-Encoding: base64

JVBERi0xLjQ=Z
""")
    parsed = parse_inbound(raw)
    assert parsed["text"].strip() == "first part"
    assert "message: close boundary not found" in parsed["problems"]
    assert parsed["attachments"][0]["content_type"] == "application/pdf"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000) | st.builds(lambda cut, junk: ALTERNATIVE[:cut] + junk + ALTERNATIVE[cut:],
                                            st.integers(0, len(ALTERNATIVE)), st.binary(max_size=40)))
def test_no_input_makes_parsing_raise(raw):
    parsed = parse_inbound(raw)
    json.dumps(parsed, ensure_ascii=False).encode("utf-8")  # JSON-ready, and no lone surrogate BSON would refuse
    for _name, value in parsed["headers"]:
        assert not {"\r", "\n", "\0"} & set(value)
    refusal = refusal_for(raw)
    assert refusal is None or (refusal.code in (552, 554) and refusal.text.startswith("5."))
