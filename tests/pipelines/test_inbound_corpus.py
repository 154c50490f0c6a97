"""Real-world messages (tests/pipelines/inbound_corpus/README.md says where each set comes
from): every one is either parsed without an exception — a JSON-ready result whose header
values carry no CR, LF or NUL — or refused at SMTP time with a reason; and a few of them,
read by eye, give the fields a person reading them would name.

Also the 117 real-world bounces of flufl.bounce's sdist (tests/support/bounce_corpus.py,
fetched into .cache/ by ops/test.sh, not copied): each parses, none is refused, and all but
two are marked automatic — so an inbound route that answers mail never answers a bounce."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.inbound.parsing import parse_inbound, refusal_for
from tests.support import bounce_corpus

CORPUS = Path(__file__).parent / "inbound_corpus"
MESSAGES = sorted(p for folder in ("cpython", "mail-parser") for p in (CORPUS / folder).iterdir()
                  if p.name not in ("LICENSE", "NOTICE"))
FIELDS = {"from", "to", "cc", "reply_to", "subject", "date", "message_id", "in_reply_to", "references", "text",
          "html", "html_sanitised", "reply", "headers", "attachments", "auto_submitted", "problems"}
REFUSED = {"mail_outlook_1": "554 5.6.0 Not an Internet message: NUL bytes in the header"}


def name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def test_the_corpus_is_all_there():
    assert len([p for p in MESSAGES if p.parent.name == "cpython"]) == 48
    assert len([p for p in MESSAGES if p.parent.name == "mail-parser"]) == 21


@pytest.mark.parametrize("path", MESSAGES, ids=name)
def test_every_message_is_parsed_or_refused_with_a_reason(path):
    raw = path.read_bytes()
    refusal = refusal_for(raw)
    if refusal is not None:
        assert f"{refusal.code} {refusal.text}" == REFUSED.get(path.name)
    else:
        assert path.name not in REFUSED
    parsed = parse_inbound(raw)  # a refused message still parses: nothing raises on any input
    assert set(parsed) == FIELDS
    json.dumps(parsed, ensure_ascii=False).encode("utf-8")  # JSON-ready, and no lone surrogate BSON would refuse
    for header_name, value in parsed["headers"]:
        assert not {"\r", "\n", "\0"} & set(header_name + value)
    for attachment in parsed["attachments"]:
        assert "/" not in attachment["filename"] and "\\" not in attachment["filename"]
        assert len(attachment["sha256"]) == 64 and attachment["size"] >= 0


def parsed(path: str):
    return parse_inbound((CORPUS / path).read_bytes())


def test_a_gb2312_subject_written_in_gbk_reads_as_chinese():
    message = parsed("mail-parser/mail_test_9")
    assert message["subject"].startswith("我把镜头拉近些") and message["from"]["address"] == "zyb@sgis.com.cn"


def test_a_body_labelled_gb2312_but_written_in_utf8_reads_right_and_is_said():
    message = parsed("mail-parser/mail_test_12")
    assert message["subject"] == "代开各地增值税发票" and message["text"].startswith("你好！我公司可代开各类增值税发票")
    assert "part 1: text is not valid gb2312" in message["problems"]


def test_cyrillic_subject_and_html_only_body():
    message = parsed("mail-parser/mail_test_6")
    assert message["subject"] == "Быстрее вкладывайте в золото!" and message["text"] is None
    assert message["html"] and message["reply"]
    assert len(message["attachments"]) == 4


def test_delivery_reports_and_list_mail_are_automatic_and_a_person_is_not():
    assert parsed("cpython/msg_16.txt")["auto_submitted"]  # a DSN (multipart/report)
    assert parsed("mail-parser/mail_malformed_2")["auto_submitted"]  # "Delivery failure", multipart/report
    assert parsed("mail-parser/mail_test_16")["auto_submitted"]  # Precedence: junk
    assert not parsed("mail-parser/mail_test_7")["auto_submitted"]  # a person forwarding an order


def test_a_forward_keeps_its_eight_files_with_their_names():
    message = parsed("mail-parser/mail_test_7")
    assert message["subject"] == "I: Ordine" and len(message["attachments"]) == 8
    assert all(a["filename"] and a["sha256"] for a in message["attachments"])


def test_broken_boundaries_and_base64_are_listed_as_problems():
    assert parsed("cpython/msg_39.txt")["problems"][:3] == [
        "part 1.1: start boundary not found", "part 1.2: invalid base64 padding", "part 1.3: invalid base64 padding"]
    assert "message: start boundary not found" in parsed("mail-parser/mail_malformed_3")["problems"]


def test_an_address_used_as_a_display_name_is_shown_as_the_name():
    message = parsed("mail-parser/mail_test_19")  # mail-parser's own case of this spoofing trick
    assert message["from"] == {"address": "bob@example.com", "name": "alice@example.com"}
    assert message["cc"] == [{"address": "frank@example.com", "name": "eve@example.com"}]
    assert parsed("mail-parser/mail_test_18")["from"] == {"address": "comma.name@example.com",
                                                          "name": "LastßlName, FirstName"}


# bounces whose headers say nothing automatic: a reply ("RE: …") carrying a GroupWise
# non-delivery in its body, and a French "non remis" answer to a moderation notice
BOUNCES_LOOKING_HUMAN = {"groupwise_03", "simple_20"}


def test_every_real_world_bounce_parses_and_is_marked_automatic():
    samples = bounce_corpus.samples()
    assert len(samples) == 117
    not_automatic = set()
    for sample in samples:
        assert refusal_for(sample.raw) is None, sample.name
        message = parse_inbound(sample.raw)
        json.dumps(message, ensure_ascii=False).encode("utf-8")
        if not message["auto_submitted"]:
            not_automatic.add(sample.name)
    assert not_automatic == BOUNCES_LOOKING_HUMAN
