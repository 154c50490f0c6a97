"""Sisimai's real-world samples (tests/support/sisimai_corpus.py) delivered as written to
the real `postroom inbound` port, on the VERP address of a message sent to the sample's
recipients and one bystander: the report is `parsed`, bounces exactly those recipients
with the class Sisimai's reason means, and suppresses only the permanent ones."""

import pytest

from tests.support import sisimai_corpus
from tests.support.inbound import report_done, sent_message, submit, verp
from tests.support.sisimai_corpus import EXPECTED, KNOWN_MISSES, expected_class


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_sisimai_sample_through_the_inbound_port_bounces_exactly_its_recipients(service, name):
    sample = next(s for s in sisimai_corpus.samples() if s.name == name)
    tenant = service.tenant()
    recipients = [r for r, _ in sample.expected]
    message_id = sent_message(service, tenant, [*recipients, f"bystander-{name}@postroom-corpus.example"])

    report = report_done(service, submit(service, sample.raw, verp(message_id)))

    assert (report["status"], report["message_id"]) == ("parsed", message_id)
    records = {r["email"]: r for r in tenant.get("/bounces").json()["data"]}
    assert sorted(records) == sorted(recipients)
    for recipient, reason in sample.expected:
        if (name, recipient) not in KNOWN_MISSES:
            assert (records[recipient]["type"], records[recipient]["category"]) == expected_class(reason)
    # only what is recorded permanent suppresses (a known difference included)
    suppressed = sorted(s["email"] for s in tenant.get("/suppressions").json()["data"])
    assert suppressed == sorted(r for r in records if records[r]["type"] == "permanent")
