"""Every sample report (RFC 3464 / RFC 5965 shapes and Gmail-, Outlook- and Yahoo-style
variants) parses to the recipient, classification, status, diagnostic and provider a
postmaster would read off it; a report bounces only recipients of the message it is about;
the classification table of pipelines/bounces/parsing/classify.py holds code by code."""

import pytest

from pipelines.bounces.effects import bounce_document, effects_of, from_smtp_rejection
from pipelines.bounces.parsing import match, parse_report
from pipelines.bounces.parsing.classify import classify, clean_diagnostic, status_from
from tests.support import reports

MID = "msg_" + "0123456789abcdef" * 2

EXPECTED = {
    # name: (recipient, style, kind, type, category, smtp_status, diagnostic contains, isp)
    "rfc3464_permanent": ("bob@example.net", "rfc3464", "bounce", "permanent", "address", "5.1.1", "User unknown",
                          "example.net"),
    "rfc3464_transient": ("bob@example.org", "rfc3464", "bounce", "transient", "mailbox_full", "4.2.2",
                          "Mailbox full", "example.org"),
    "gmail_dsn": ("bob@gmail.com", "rfc3464", "bounce", "permanent", "address", "5.1.1",
                  "does not exist. Please try double-checking", "gmail"),
    "gmail_text": ("bob@example.com", "gmail", "bounce", "transient", "address", "5.2.1", "Mailbox disabled",
                   "example.com"),
    "outlook_dsn": ("bob@outlook.com", "rfc3464", "bounce", "permanent", "address", "5.1.10",
                    "RESOLVER.ADR.RecipientNotFound", "outlook"),
    "exchange_text": ("bob@contoso.com", "outlook", "bounce", "permanent", "address", "5.1.1", "RecipNotFound",
                      "outlook"),
    "yahoo_failure": ("bob@yahoo.com", "yahoo", "bounce", "permanent", "address", "554",
                      "doesn't have a yahoo.com account", "yahoo"),
    "arf_abuse": ("bob@example.com", "arf", "complaint", "permanent", "", "", "complaint (abuse)", "example.com"),
    "yahoo_arf": ("bob@yahoo.com", "arf", "complaint", "permanent", "", "", "Yahoo!-Mail-Feedback", "yahoo"),
    "outlook_arf": ("bob@hotmail.com", "arf", "complaint", "permanent", "", "", "Junk Mail Reporting", "outlook"),
}


def parsed(name, recipient, sent_to=None, **kw):
    """The sample report for a message sent to `sent_to` (default: just `recipient`): the
    report and the bounces it is believed for."""
    report = parse_report(reports.load(name, recipient=recipient, message_id=MID), **kw)
    return report, match(report.bounces, sent_to or [recipient])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_report_parses_to_the_expected_bounce(name):
    recipient, style, kind, type_, category, status, words, isp = EXPECTED[name]
    report, matched = parsed(name, recipient)
    assert report is not None and report.style == style
    [bounce] = matched.bounces
    assert matched.ignored == []
    assert (bounce.email, bounce.kind, bounce.type, bounce.category, bounce.smtp_status, bounce.isp_name) == \
        (recipient, kind, type_, category, status, isp)
    assert words in bounce.diagnostic_code
    assert report.message_id == MID
    assert bounce.source == ("arf" if kind == "complaint" else "dsn")


def test_gmail_multi_line_diagnostic_loses_its_repeated_codes():
    _, matched = parsed("gmail_dsn", "bob@gmail.com")
    diagnostic = matched.bounces[0].diagnostic_code
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
    report = parse_report(raw.replace(b"Action: failed", b"Action: delivered"))
    assert report is not None and report.bounces == []


@pytest.mark.parametrize("status, diagnostic, action, expected", [
    # 5.1.x: the address does not exist — the one kind of failure that suppresses for good
    ("5.1.1", "", "failed", ("permanent", "address")),
    ("5.1.10", "RESOLVER.ADR.RecipientNotFound", "failed", ("permanent", "address")),
    ("5.2.1", "mailbox disabled", "failed", ("transient", "address")),   # suspended: not gone for good
    ("5.4.4", "no MX for the domain", "failed", ("permanent", "address")),
    # 5.1.7/5.1.8 are about *our* address: not the recipient's fault
    ("5.1.8", "sender domain does not resolve", "failed", ("transient", "policy")),
    # policy and reputation, size, a full mailbox: class 5, and still no reason to suppress
    ("5.7.1", "550 5.7.1 Message rejected as unsolicited", "failed", ("transient", "policy")),
    ("5.7.26", "unauthenticated email is not accepted", "failed", ("transient", "policy")),
    ("5.3.4", "552 5.3.4 message too big", "failed", ("transient", "message")),
    ("5.2.2", "552 5.2.2 mailbox full", "failed", ("transient", "mailbox_full")),
    ("5.6.0", "", "failed", ("transient", "message")),
    ("5.4.7", "delivery time expired", "failed", ("transient", "system")),
    # vague codes: the words decide
    ("5.0.0", "550 5.0.0 user unknown", "failed", ("permanent", "address")),
    ("5.0.0", "5.0.0 (recipient reached disk quota)", "failed", ("transient", "mailbox_full")),
    ("5.0.0", "blocked using zen.spamhaus.org", "failed", ("transient", "policy")),
    ("5.0.0", "", "failed", ("undetermined", "other")),
    # basic codes without an enhanced one are codes too
    ("553", "Status: 553", "failed", ("permanent", "address")),
    ("551", "551 user not local", "failed", ("permanent", "address")),
    ("552", "552 Exceeded storage allocation", "failed", ("transient", "mailbox_full")),
    ("552", "552 message size exceeds the maximum", "failed", ("transient", "message")),
    ("554", "554 Transaction failed", "failed", ("undetermined", "other")),
    ("554", "554 rejected due to spam content", "failed", ("transient", "policy")),
    ("550", "550 Requested action not taken: mailbox unavailable", "failed", ("permanent", "address")),
    ("421", "421 try again later", "failed", ("transient", "system")),
    # class 4, delays, and nothing to go on
    ("4.4.1", "", "failed", ("transient", "system")),
    ("5.1.1", "", "delayed", ("transient", "address")),
    ("", "the mailbox is over quota", "", ("transient", "mailbox_full")),
    ("", "No such user here", "", ("permanent", "address")),
    ("", "something odd happened", "failed", ("undetermined", "other")),
])
def test_classification_by_enhanced_code_then_basic_code_then_words(status, diagnostic, action, expected):
    verdict = classify(status, diagnostic, action)
    assert (verdict.type, verdict.category) == expected


def test_a_notice_that_calls_itself_permanent_says_nothing_about_the_address():
    # Gmail's "failed permanently" after a timeout or a STARTTLS failure: only the reason counts
    assert classify("", "", "failed", notice="This is a permanent error; I've given up.").type == "undetermined"
    assert classify("", "", "failed", notice="Mail delivery failed.").type == "undetermined"
    assert classify("", "", "failed", notice="failed permanently: the connection timed out").type == "transient"


@pytest.mark.parametrize("status, diagnostic, expected", [
    ("5.1.1", "", "5.1.1"),
    ("", "smtp; 550 5.7.1 <a@b.c>: blocked", "5.7.1"),
    ("553", "", "553"),                       # a bare basic code is kept as the code it is
    ("", "host mx said: 550 unknown user", "550"),
    ("", "host [195.7.46.14] said: 451 later", "451"),   # not the IP's digits
    ("", "Customer Support at 480-624-2500", ""),        # not a phone number
    ("", "X-Mailman-Version: 2.0.13", ""),              # not a version
    ("2.0.0", "250 2.0.0 ok", ""),                      # success is no failure's code
])
def test_status_codes_are_read_from_the_field_then_the_diagnostic(status, diagnostic, expected):
    assert status_from(status, diagnostic) == expected


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


@pytest.mark.parametrize("reply", ["5.7.1 Message rejected as unsolicited mail", "5.3.4 Message too big",
                                   "5.2.2 Mailbox full"])
def test_a_policy_block_size_refusal_or_full_mailbox_bounces_the_message_and_suppresses_nobody(reply):
    doc = _doc(from_smtp_rejection("a@x.org", 552 if "5.3.4" in reply else 550, reply).replace(source="dsn"))
    effects = effects_of(doc, transient_count=1)
    assert (doc["type"], effects.message_status, effects.mark_contact_bounced, effects.suppress_reason) == \
        ("transient", "bounced", False, None)


def test_policy_blocks_never_count_towards_the_soft_bounce_rule():
    doc = _doc(from_smtp_rejection("a@x.org", 550, "5.7.1 blocked by reputation").replace(source="dsn"))
    assert effects_of(doc, transient_count=5).suppress_reason is None


def test_transient_bounces_suppress_at_the_third_within_the_window():
    _, matched = parsed("rfc3464_transient", "a@x.org")
    doc = _doc(matched.bounces[0])
    assert effects_of(doc, transient_count=2).suppress_reason is None
    assert effects_of(doc, transient_count=3).suppress_reason == "soft_bounce"
    assert effects_of(doc, transient_count=1).message_status is None  # delayed: still being retried


def test_a_complaint_suppresses_without_touching_the_message_status():
    _, matched = parsed("arf_abuse", "a@x.org")
    effects = effects_of(_doc(matched.bounces[0]), transient_count=0)
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


def test_a_report_bounces_only_the_recipients_the_message_was_sent_to():
    report, matched = parsed("rfc3464_permanent", "victim@unrelated.example", sent_to=["bob@example.net"])
    assert report is not None and matched.bounces == []
    assert matched.ignored == ["victim@unrelated.example"]


def test_of_several_named_recipients_only_those_sent_to_are_bounced():
    report = parse_report(reports.load("rfc3464_permanent", recipient="bob@example.net", message_id=MID))
    two = report.bounces + [report.bounces[0].replace(email="eve@elsewhere.example")]
    matched = match(two, ["Bob@Example.NET", "carol@example.net"])
    assert [b.email for b in matched.bounces] == ["Bob@Example.NET"]   # as stored
    assert matched.ignored == ["eve@elsewhere.example"]


def test_original_recipient_is_used_when_final_recipient_is_not_an_internet_address():
    raw = reports.load("rfc3464_permanent", recipient="bob@example.net", message_id=MID)
    raw = raw.replace(b"Final-Recipient: rfc822; bob@example.net",
                      b"Original-Recipient: rfc822; bob@example.net\r\n"
                      b"Final-Recipient: x400; /S=bob/PRMD=EXAMPLE/C=GB/")
    assert b"x400" in raw
    [bounce] = match(parse_report(raw).bounces, ["bob@example.net"]).bounces
    assert (bounce.email, bounce.type) == ("bob@example.net", "permanent")


def test_original_recipient_matches_when_forwarding_rewrote_the_final_one():
    raw = reports.load("rfc3464_permanent", recipient="bob@example.net", message_id=MID)
    raw = raw.replace(b"Final-Recipient: rfc822; bob@example.net",
                      b"Original-Recipient: rfc822;bob@example.net\r\nFinal-Recipient: rfc822;bob@sims-ms-daemon")
    matched = match(parse_report(raw).bounces, ["bob@example.net"])
    assert [b.email for b in matched.bounces] == ["bob@example.net"] and matched.ignored == []


def test_a_domain_in_a_labels_matches_the_stored_u_labels():
    report, matched = parsed("rfc3464_permanent", "kunde@xn--bcher-kva.example", sent_to=["kunde@bücher.example"])
    assert [b.email for b in matched.bounces] == ["kunde@bücher.example"]


def test_a_redacted_complaint_is_the_complaint_of_the_one_recipient():
    raw = reports.load("arf_abuse", recipient="redacted@example.com", message_id=MID)
    raw = raw.replace(b"Original-Rcpt-To: <redacted@example.com>\r\n", b"")
    raw = raw.replace(b"redacted@example.com", b"xxxxxxxx")
    assert b"redacted" not in raw
    report = parse_report(raw)
    assert report.message_id == MID and report.bounces[0].email == ""
    [complaint] = match(report.bounces, ["alice@example.org"]).bounces
    assert (complaint.email, complaint.kind, complaint.isp_name) == ("alice@example.org", "complaint", "example.org")
    # with several recipients nobody can tell whose it was: nobody is suppressed
    assert match(report.bounces, ["alice@example.org", "bob@example.org"]).bounces == []


def test_a_report_repeating_a_recipient_bounces_it_once():
    report = parse_report(reports.load("rfc3464_permanent", recipient="bob@example.net", message_id=MID))
    assert len(match(report.bounces * 3, ["bob@example.net"]).bounces) == 1


def test_the_yahoo_notice_never_reads_addresses_out_of_the_quoted_original():
    raw = reports.load("yahoo_failure", recipient="bob@yahoo.com", message_id=MID)
    raw = raw + b"\r\n<quoted@elsewhere.example>:\r\n554: delivery error: dd quoted text\r\n"
    report = parse_report(raw)
    assert [b.email for b in report.bounces] == ["bob@yahoo.com"]
