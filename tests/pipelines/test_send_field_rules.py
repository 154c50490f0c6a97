"""The rules behind issue #35's send fields, without services: which files are sent and as
what type, file names as MIME writes them, the caller's headers, recipients by header, and
the labels every event carries."""

import base64
import email
import email.policy

import pytest

from pipelines.audience import recipients
from pipelines.messages import attachments, custom_headers, labels, mime_parts
from pipelines.messages.mime import compose

MB = 1024 * 1024


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_ten_megabytes_exactly_is_the_limit_for_one_file_and_for_all_together():
    exactly = attachments.checked("a.dat", b64(bytes(10 * MB)))
    assert exactly.size == 10 * MB and attachments.total_problem([exactly]) is None
    with pytest.raises(attachments.AttachmentRefused) as refused:
        attachments.checked("a.dat", b64(bytes(10 * MB + 1)))
    assert refused.value.field == "content"
    halves = [attachments.checked(f"{i}.dat", b64(bytes(5 * MB + i))) for i in range(2)]
    assert "10 MB" in attachments.total_problem(halves)


def test_base64_may_be_wrapped_in_lines_but_not_broken():
    wrapped = base64.encodebytes(b"%PDF-1.4 body").decode()
    assert attachments.checked("a.pdf", wrapped).data == b"%PDF-1.4 body"
    with pytest.raises(attachments.AttachmentRefused):
        attachments.decode("QUJ")  # cut short
    with pytest.raises(attachments.AttachmentRefused):
        attachments.decode("QU*D")


@pytest.mark.parametrize("data, declared, name, sent_as", [
    (b"GIF89a....", None, "x", "image/gif"),
    (b"RIFF\x00\x00\x00\x00WEBPVP8 ", None, "x", "image/webp"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1rest", "application/msword", "a.doc", "application/msword"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1rest", "application/vnd.ms-excel", "a.xls", "application/vnd.ms-excel"),
    (b"PK\x03\x04", "application/epub+zip", "a.epub", "application/epub+zip"),
    (b"\xff\xd8\xff\xe0", "image/jpg", "a.jpg", "image/jpg"),
    (b"<svg/>", None, "a.svg", "image/svg+xml"),
    (b"hello", None, "a.unknownext", "application/octet-stream"),
])
def test_types_agree_with_the_bytes(data, declared, name, sent_as):
    assert attachments.content_type_of(name, data, declared) == sent_as


@pytest.mark.parametrize("data, declared, name, field", [
    (b"%PDF-1.4", "image/png", "a.pdf", "content_type"),
    (b"\x89PNG\r\n\x1a\n", "application/zip", "a.png", "content_type"),
    (b"hello", "image/jpeg", "a.jpg", "content_type"),
    (b"hello", None, "a.pdf", "content"),
    (b"MZ\x90", "application/octet-stream", "a.dat", "content"),
    (b"\xcf\xfa\xed\xfe", None, "a.dat", "content"),
    (b"#!/usr/bin/env python", "text/plain", "a.txt", "content"),
    (b"echo", "application/x-sh", "a.txt", "content_type"),
    (b"PK\x03\x04", "application/java-archive", "a.zip", "content_type"),
])
def test_types_the_bytes_contradict_and_programs_are_refused(data, declared, name, field):
    with pytest.raises(attachments.AttachmentRefused) as refused:
        attachments.content_type_of(name, data, declared)
    assert refused.value.field == field


@pytest.mark.parametrize("name", ["a.exe", "A.DLL", "x.js", "x.ps1", "x.sh", "x.jar", "x.app", "x.msi", "x.vbs",
                                  "x.bat", "x.cmd", "x.scr", "x.com", "x.jse", "x.wsf", "x.exe.", "x.exe  "])
def test_program_and_script_names_are_refused(name):
    with pytest.raises(attachments.AttachmentRefused):
        attachments.check_filename(name)


def test_a_file_name_is_quoted_or_rfc_2231_and_reads_back_exactly():
    for name in ["plain.pdf", 'with "quotes".pdf', "semi;colon=equals.txt", "Grüße.pdf", "報告書.pdf",
                 "x" * 200 + ".pdf", "ü" * 120 + ".pdf"]:
        header = mime_parts.parameter("filename", name)
        assert "\r\n\r\n" not in header and all(len(line) <= 78 for line in header.split("\r\n"))
        data = compose(message_id="m", from_address="a@example.org", from_name=None, to=["b@example.org"],
                       subject="s", html="<p>x</p>", text=None, reply_to=None, id_domain="example.org",
                       files=[({"filename": name, "content_type": "application/pdf", "content_id": None}, b"%PDF")])
        [part] = email.message_from_bytes(data, policy=email.policy.strict).iter_attachments()
        assert part.get_filename() == name and part.get_content() == b"%PDF"


def test_caller_headers_are_checked_and_folded_without_encoding_message_ids():
    long_id = "<" + "x" * 200 + "@example.org>"
    lines = custom_headers.header_lines([("References", f"<a@example.org> {long_id}"), ("X-Text", "Grüße"),
                                         ("X-Empty", "")])
    assert long_id.encode() in lines and b"=?utf-8?b?" in lines and b"X-Empty: \r\n" in lines
    assert all(len(line) <= 998 for line in lines.split(b"\r\n"))
    with pytest.raises(custom_headers.HeaderRefused) as refused:
        custom_headers.checked({"X-Ok": "1", "dkim-signature": "v=1"})
    assert refused.value.name == "dkim-signature"
    with pytest.raises(custom_headers.HeaderRefused):
        custom_headers.checked({"X-A": "a\u2028b"})


def test_recipients_by_header_make_one_envelope_and_suppression_trims_each_header():
    lists = recipients.recipient_lists("a@x.org", ["b@x.org", "A@x.org"], "c@x.org")
    assert lists == {"to": ["a@x.org"], "cc": ["b@x.org"], "bcc": ["c@x.org"]}
    message = {**lists, "_id": "m"}
    assert recipients.envelope(message) == ["a@x.org", "b@x.org", "c@x.org"]
    changes, nobody_left = recipients.without_suppressed(message, {"a@x.org", "c@x.org"})
    assert not nobody_left and changes == {"suppressed_recipients": ["a@x.org", "c@x.org"], "to": [],
                                           "cc": ["b@x.org"], "bcc": []}
    assert recipients.first_recipient({**message, **changes}) == "b@x.org"
    with pytest.raises(ValueError, match="bcc"):
        recipients.recipient_lists(["t@x.org"] * 25, ["c@x.org"] * 25, "one-too-many@x.org")


def test_an_empty_to_is_written_as_the_undisclosed_group():
    data = compose(message_id="m", from_address="a@example.org", from_name=None, to=[], cc=["c@example.org"],
                   subject="s", html=None, text="x", reply_to=None, id_domain="example.org")
    msg = email.message_from_bytes(data, policy=email.policy.strict)
    assert msg["To"] == "undisclosed-recipients:;" and msg["Cc"] == "c@example.org"


def test_labels_are_stored_with_their_index_form_and_carried_by_events():
    stored = labels.stored_labels({"a": "1", "b.c": "x=y"}, ["t", "t", "u"])
    assert stored == {"metadata": {"a": "1", "b.c": "x=y"}, "metadata_pairs": ["a=1", "b.c=x=y"], "tags": ["t", "u"]}
    assert labels.event_labels({}) == {"metadata": {}, "tags": []}
