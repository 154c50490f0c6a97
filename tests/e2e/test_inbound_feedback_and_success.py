"""Issue #32 through the real inbound port: an ARF report suppresses only for abuse or fraud
(not-spam, auth-failure, virus and other are kept and shown to the operator, nobody
suppressed, no complaint recorded), and a DSN with a success status bounces nobody."""

import pytest

from tests.support import reports
from tests.support.inbound import dsn, report_done, sent_message, submit, verp


def arf(feedback_type: str, recipient: str, message_id: str) -> bytes:
    raw = reports.load("arf_abuse", recipient=recipient, message_id=message_id)
    return raw.replace(b"Feedback-Type: abuse", f"Feedback-Type: {feedback_type}".encode())


@pytest.mark.parametrize("feedback_type", ["not-spam", "auth-failure", "virus", "other"])
def test_an_arf_report_that_is_no_complaint_suppresses_nobody_and_is_kept_for_the_operator(service, feedback_type):
    tenant = service.tenant()
    recipient = f"reader-{feedback_type}@example.com"
    message_id = sent_message(service, tenant, recipient)

    report = report_done(service, submit(service, arf(feedback_type, recipient, message_id), verp(message_id)))

    assert (report["status"], report["style"], report["feedback_types"]) == ("parsed", "arf", [feedback_type])
    assert report["bounce_ids"] == [] and "not a complaint" in report["detail"]
    assert tenant.get("/bounces").json()["data"] == []
    assert tenant.get("/suppressions").json()["data"] == []
    assert tenant.get(f"/email/{message_id}/status").json()["data"]["status"] == "delivered"


@pytest.mark.parametrize("feedback_type", ["abuse", "fraud"])
def test_an_abuse_or_fraud_report_is_a_complaint_and_suppresses(service, feedback_type):
    tenant = service.tenant()
    recipient = f"reader-{feedback_type}@example.com"
    message_id = sent_message(service, tenant, recipient)

    report = report_done(service, submit(service, arf(feedback_type, recipient, message_id), verp(message_id)))

    assert report["status"] == "parsed"
    [record] = tenant.get("/bounces").json()["data"]
    assert (record["kind"], record["feedback_type"]) == ("complaint", feedback_type)
    [entry] = tenant.get("/suppressions").json()["data"]
    assert (entry["email"], entry["reason"]) == (recipient, "complaint")


def test_a_dsn_with_a_success_status_bounces_nobody(service):
    tenant = service.tenant()
    message_id = sent_message(service, tenant, "checked@example.com")
    raw = dsn(message_id, [{"final": "checked@example.com", "action": "deliverable", "status": "2.1.5",
                            "diagnostic": "250 2.1.5 Recipient OK"}])

    report = report_done(service, submit(service, raw, verp(message_id)))

    assert (report["status"], report["bounce_ids"]) == ("parsed", [])
    assert tenant.get("/bounces").json()["data"] == []
    assert tenant.get("/suppressions").json()["data"] == []
    assert tenant.get(f"/email/{message_id}/status").json()["data"]["status"] == "delivered"
