"""Issue #32's points, in the parsing alone: refusals aimed at the sender never suppress,
each ARF Feedback-Type has its own effect, and a success status is never a bounce."""

import pytest

from pipelines.bounces import effects as bounce_effects
from pipelines.bounces.parsing import parse_report
from pipelines.bounces.parsing.classify import classify, status_from
from tests.support import reports
from tests.support.inbound import dsn

MID = "msg_" + "7c" * 16


@pytest.mark.parametrize("status, diagnostic, reason", [
    ("5.0.0", "552 Too many recipients", "toomanyconn"),
    ("5.0.0", "554 5.0.0 Reverse DNS (PTR) required for your IP", "requireptr"),
    ("", "554 Service currently unavailable", "systemerror"),
    ("5.2.0", "550 5.2.0 Mail rejected", "rejected"),
    ("5.2.0", "550 5.2.0 Message rejected as spam", "spamdetected"),
    ("5.1.1", "550 5.7.1 IP address blacklisted", "blocked"),
    ("", "The recipient server did not accept our requests to connect. [mx.example.com: timed out]", "networkerror"),
    ("", "TLS Negotiation failed, the certificate doesn't match the host.", "securityerror"),
])
def test_a_refusal_aimed_at_the_sender_never_suppresses_the_recipient(status, diagnostic, reason):
    verdict = classify(status_from(status, diagnostic), f"{status} {diagnostic}", "failed",
                       notice="Delivery to the following recipient failed permanently")
    assert (verdict.reason, verdict.type) == (reason, "transient")


@pytest.mark.parametrize("status, diagnostic, reason", [
    ("5.1.1", "550 5.1.1 <bob@example.com>: Recipient address rejected: User unknown", "userunknown"),
    ("5.0.0", "550 Host unknown", "hostunknown"),
    ("5.1.6", "550 5.1.6 recipient has moved", "hasmoved"),
    ("5.1.10", "556 5.1.10 Recipient address has null MX", "notaccept"),
    ("5.4.4", "Host or domain name not found. Name service error for name=example.jp type=A: Host not found",
     "hostunknown"),
])
def test_only_a_missing_address_or_domain_is_permanent(status, diagnostic, reason):
    # (a DNS answer that says "try again" is the network's, not a missing domain: transient)
    verdict = classify(status_from(status, diagnostic), diagnostic, "failed")
    assert (verdict.reason, verdict.type, verdict.category) == (reason, "permanent", "address")


def arf(feedback_type: str) -> bytes:
    raw = reports.load("arf_abuse", recipient="bob@example.com", message_id=MID)
    return raw.replace(b"Feedback-Type: abuse", f"Feedback-Type: {feedback_type}".encode())


@pytest.mark.parametrize("feedback_type, complaint", [
    ("abuse", True), ("fraud", True),
    ("not-spam", False), ("auth-failure", False), ("virus", False), ("other", False),
])
def test_each_arf_feedback_type_has_its_own_effect(feedback_type, complaint):
    report = parse_report(arf(feedback_type))
    [bounce] = report.bounces
    assert bounce.feedback_type == feedback_type
    assert bounce_effects.is_complaint(bounce) is complaint
    assert bounce_effects.is_feedback_notice(bounce) is not complaint


@pytest.mark.parametrize("action, status", [("deliverable", "2.1.5"), ("failed", "2.0.0"), ("delivered", "2.0.0")])
def test_a_success_status_is_never_a_bounce(action, status):
    raw = dsn(MID, [{"final": "bob@example.com", "action": action, "status": status,
                     "diagnostic": f"250 {status} OK"}])
    report = parse_report(raw)
    assert (report.style, report.bounces) == ("rfc3464-success", [])


@pytest.mark.parametrize("technical, reason", [
    ("The recipient server did not accept our requests to connect. [mx.example.jp. (10): Connection timed out]",
     "networkerror"),
    ("TLS Negotiation failed, the certificate doesn't match the host.", "securityerror"),
])
def test_a_gmail_notice_that_failed_permanently_without_a_reply_is_read_from_its_technical_details(technical, reason):
    raw = f"""From: Mail Delivery Subsystem <mailer-daemon@googlemail.com>
To: bounce+{MID}@bounces.postroom.test
Subject: Delivery Status Notification (Failure)

Delivery to the following recipient failed permanently:

     bob@example.jp

Technical details of permanent failure:
{technical}

----- Original message -----
""".encode()
    [bounce] = parse_report(raw).bounces
    assert (bounce.email, bounce.reason, bounce.type) == ("bob@example.jp", reason, "transient")


def test_a_person_replying_about_a_failure_is_no_bounce():
    raw = f"""From: Bob <bob@example.jp>
To: bounce+{MID}@bounces.postroom.test
Subject: Re: Undelivered Mail Returned to Sender

Your mail to carol@example.jp failed: 550 5.1.1 user unknown. Can you resend it to me?
""".encode()
    assert parse_report(raw) is None


def test_a_dns_answer_that_says_try_again_is_the_networks():
    verdict = classify("5.4.4", "Name service error for name=example.jp type=MX: Host not found, try again", "failed")
    assert (verdict.reason, verdict.type) == ("networkerror", "transient")


def test_a_dsn_whose_diagnostic_contradicts_its_status_is_read_by_the_diagnostic():
    raw = dsn(MID, [{"final": "bob@example.com", "status": "5.1.1",
                     "diagnostic": "550 5.7.1 IP address 192.0.2.1 blacklisted"}])
    [bounce] = parse_report(raw).bounces
    assert (bounce.smtp_status, bounce.reason, bounce.type, bounce.category) == ("5.7.1", "blocked", "transient",
                                                                                  "policy")
