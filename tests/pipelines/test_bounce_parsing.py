"""Every sample report (RFC 3464 / RFC 5965 shapes and Gmail-, Outlook- and Yahoo-style
variants) parses to the recipient, classification, status, diagnostic and provider a
postmaster would read off it."""

import pytest

from pipelines.bounce_effects import bounce_document, effects_of, from_smtp_rejection
from pipelines.bounce_parsing import parse_report
from pipelines.bounce_parsing.classify import classify, clean_diagnostic
from tests.support import reports

MID = "msg_" + "0123456789abcdef" * 2

EXPECTED = {
    # name: (recipient, style, kind, type, smtp_status, diagnostic contains, isp)
    "rfc3464_permanent": ("bob@example.net", "rfc3464", "bounce", "permanent", "5.1.1", "User unknown", "example.net"),
    "rfc3464_transient": ("bob@example.org", "rfc3464", "bounce", "transient", "4.2.2", "Mailbox full", "example.org"),
    "gmail_dsn": ("bob@gmail.com", "rfc3464", "bounce", "permanent", "5.1.1",
                  "does not exist. Please try double-checking", "gmail"),
    "gmail_text": ("bob@example.com", "gmail", "bounce", "permanent", "5.2.1", "Mailbox disabled", "example.com"),
    "outlook_dsn": ("bob@outlook.com", "rfc3464", "bounce", "permanent", "5.1.10", "RESOLVER.ADR.RecipientNotFound",
                    "outlook"),
    "exchange_text": ("bob@contoso.com", "outlook", "bounce", "permanent", "5.1.1", "RecipNotFound", "outlook"),
    "yahoo_failure": ("bob@yahoo.com", "yahoo", "bounce", "permanent", "5.0.0",
                      "doesn't have a yahoo.com account", "yahoo"),
    "arf_abuse": ("bob@example.com", "arf", "complaint", "permanent", "", "complaint (abuse)", "example.com"),
    "yahoo_arf": ("bob@yahoo.com", "arf", "complaint", "permanent", "", "Yahoo!-Mail-Feedback", "yahoo"),
    "outlook_arf": ("bob@hotmail.com", "arf", "complaint", "permanent", "", "Junk Mail Reporting", "outlook"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_report_parses_to_the_expected_bounce(name):
    recipient, style, kind, type_, status, words, isp = EXPECTED[name]
    report = parse_report(reports.load(name, recipient=recipient, message_id=MID))
    assert report is not None and report.style == style
    [bounce] = report.bounces
    assert (bounce.email, bounce.kind, bounce.type, bounce.smtp_status, bounce.isp_name) == \
        (recipient, kind, type_, status, isp)
    assert words in bounce.diagnostic_code
    assert report.message_id == MID
    assert bounce.source == ("arf" if kind == "complaint" else "dsn")


def test_gmail_multi_line_diagnostic_loses_its_repeated_codes():
    report = parse_report(reports.load("gmail_dsn", recipient="bob@gmail.com", message_id=MID))
    diagnostic = report.bounces[0].diagnostic_code
    assert diagnostic.startswith("550 5.1.1 The email account")
    assert "550-" not in diagnostic and diagnostic.count("5.1.1") == 1


def test_the_verp_address_wins_over_ids_quoted_in_the_report():
    other = "msg_" + "f" * 32
    report = parse_report(reports.load("rfc3464_permanent", recipient="a@example.net", message_id=MID),
                          verp_message_id=other)
    assert report.message_id == other


def test_an_out_of_office_reply_is_not_a_report():
    assert parse_report(reports.load("out_of_office", recipient="a@example.net", message_id=MID)) is None
    assert parse_report(b"\x00\xff garbage without headers") is None


def test_delivered_and_relayed_actions_are_not_bounces():
    raw = reports.load("rfc3464_permanent", recipient="a@example.net", message_id=MID)
    assert parse_report(raw.replace(b"Action: failed", b"Action: delivered")) is None


@pytest.mark.parametrize("status, diagnostic, action, expected", [
    ("5.1.1", "", "failed", "permanent"),
    ("4.4.1", "", "failed", "transient"),
    ("", "550 user unknown", "failed", "permanent"),
    ("", "421 try again later", "failed", "transient"),
    ("", "the mailbox is over quota", "", "transient"),
    ("", "No such user here", "", "permanent"),
    ("5.1.1", "", "delayed", "transient"),
    ("", "something odd happened", "failed", "undetermined"),
])
def test_classification_from_status_code_then_text(status, diagnostic, action, expected):
    assert classify(status, diagnostic, action) == expected


def test_clean_diagnostic_drops_the_type_prefix():
    assert clean_diagnostic("smtp; 550 5.1.1 <a@b.c>: user unknown") == "550 5.1.1 <a@b.c>: user unknown"


def _doc(bounce, origin="r1"):
    return bounce_document(bounce, origin=origin, workspace_id="ws", message_id=MID, created_at="2026-03-02T00:00:00Z")


def test_a_permanent_bounce_bounces_the_message_marks_the_contact_and_suppresses():
    effects = effects_of(_doc(from_smtp_rejection("a@x.org", 550, "5.1.1 user unknown").replace(source="dsn")),
                         transient_count=0)
    assert (effects.message_status, effects.mark_contact_bounced, effects.suppress_reason, effects.event) == \
        ("bounced", True, "hard_bounce", "email.bounced")
    assert effects.counters == {"bounces": 1}


def test_transient_bounces_suppress_at_the_third_within_the_window():
    report = parse_report(reports.load("rfc3464_transient", recipient="a@x.org", message_id=MID))
    doc = _doc(report.bounces[0])
    assert effects_of(doc, transient_count=2).suppress_reason is None
    assert effects_of(doc, transient_count=3).suppress_reason == "soft_bounce"
    assert effects_of(doc, transient_count=1).message_status is None  # delayed: still being retried


def test_a_complaint_suppresses_without_touching_the_message_status():
    report = parse_report(reports.load("arf_abuse", recipient="a@x.org", message_id=MID))
    effects = effects_of(_doc(report.bounces[0]), transient_count=0)
    assert (effects.message_status, effects.suppress_reason, effects.event, effects.counters) == \
        (None, "complaint", "email.complained", {"complaints": 1})


def test_a_synchronous_rejection_is_not_counted_twice():
    doc = _doc(from_smtp_rejection("a@x.org", 550, "5.1.1 user unknown"))
    effects = effects_of(doc, transient_count=0)
    assert effects.counters == {} and effects.message_status is None and effects.suppress_reason == "hard_bounce"
    assert doc["smtp_status"] == "5.1.1" and doc["source"] == "smtp"


def test_bounce_ids_are_stable_per_report_and_recipient():
    bounce = from_smtp_rejection("A@x.org", 550, "no")
    assert _doc(bounce)["_id"] == _doc(bounce.replace(email="a@x.org"))["_id"] != _doc(bounce, "r2")["_id"]
