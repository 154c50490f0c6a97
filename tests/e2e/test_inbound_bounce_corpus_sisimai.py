"""Sisimai's real-world samples (tests/support/sisimai_corpus.py) delivered as written to
the real `postroom inbound` port, on the VERP address of a message sent to the sample's
recipients and one bystander: the report is `parsed`, bounces exactly those recipients
with the class Sisimai's reason means, and suppresses only the permanent ones.

The trips overlap: every sample's message is sent (each from a workspace of its own), then
each report handed to the port once its message is delivered, and each test checks its
own sample's outcome — the same trip per sample as one at a time, without the waits in
series."""

import pytest

from tests.support import sisimai_corpus
from tests.support.inbound import report_done, reports_of_sent_messages
from tests.support.sisimai_corpus import EXPECTED, KNOWN_MISSES, expected_class


@pytest.fixture(scope="module")
def trips(service):
    return reports_of_sent_messages(service, {s.name: ([r for r, _ in s.expected], s.raw)
                                              for s in sisimai_corpus.samples() if s.name in EXPECTED})


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_sisimai_sample_through_the_inbound_port_bounces_exactly_its_recipients(service, trips, name):
    sample = next(s for s in sisimai_corpus.samples() if s.name == name)
    tenant, message_id, report_id = trips[name]
    recipients = [r for r, _ in sample.expected]

    report = report_done(service, report_id)

    assert (report["status"], report["message_id"]) == ("parsed", message_id)
    records = {r["email"]: r for r in tenant.get("/bounces").json()["data"]}
    assert sorted(records) == sorted(recipients)
    for recipient, reason in sample.expected:
        if (name, recipient) not in KNOWN_MISSES:
            assert (records[recipient]["type"], records[recipient]["category"]) == expected_class(reason)
    # only what is recorded permanent suppresses (a known difference included)
    suppressed = sorted(s["email"] for s in tenant.get("/suppressions").json()["data"])
    assert suppressed == sorted(r for r in records if records[r]["type"] == "permanent")
