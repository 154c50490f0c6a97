"""Real-world bounce samples from flufl.bounce's sdist (tests/support/bounce_corpus.py),
delivered as written by their MTAs to the real `postroom inbound` port, on the VERP
address of a message we actually sent to the sample's address.

Every sample goes through the port (a workspace, a send through the sink, the report
through the port), the 111 with an address in flufl.bounce's table and the 6 without;
tests/pipelines/test_bounce_corpus.py runs the same parsing pipeline over them in-process,
for the counts. The trips overlap: every sample's message is sent first, then each report
handed to the port once its message is delivered, and each test checks its own sample.

Each message goes to one more recipient the report does not name, and — where a sample
names several addresses — not to the last of them: the report must bounce exactly the
addresses it names that the message went to, and record the other one as ignored."""

import pytest

from tests.support import bounce_corpus
from tests.support.bounce_corpus import EXPECTED
from tests.support.inbound import report_done, reports_of_sent_messages

WITHOUT_ADDRESS = sorted(s.name for s in bounce_corpus.samples() if not s.addresses)


def recipients(name: str) -> tuple[list[str], list[str]]:
    """(sent to, named but not sent to): where a sample names several addresses, the
    message does not go to the last of them."""
    sample = bounce_corpus.by_name()[name]
    named = [a.rsplit("@", 1)[0] + "@" + a.rsplit("@", 1)[1].lower() for a in sample.addresses]  # as the API stores
    return (named[:-1], named[-1:]) if len(named) > 1 else (named, [])


@pytest.fixture(scope="module")
def trips(service):
    return reports_of_sent_messages(service, {name: (recipients(name)[0], bounce_corpus.by_name()[name].raw)
                                              for name in [*sorted(EXPECTED), *WITHOUT_ADDRESS]})


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_world_report_through_the_inbound_port_bounces_exactly_its_recipients(service, trips, name):
    sample = bounce_corpus.by_name()[name]
    style = EXPECTED[name][0]
    sent_to, not_sent = recipients(name)
    tenant, message_id, report_id = trips[name]

    report = report_done(service, report_id)

    assert (report["status"], report["style"], report["message_id"]) == ("parsed", style, message_id)
    assert [a.lower() for a in report["ignored_recipients"]] == [a.lower() for a in not_sent]
    records = tenant.get("/bounces").json()["data"]
    assert sorted(r["email"] for r in records) == sorted(sent_to)
    for record in records:
        type_, category = bounce_corpus.expected_class(name, record["email"])
        assert (record["type"], record["category"], record["message_id"]) == (type_, category, message_id)
        assert record["action"] == ("delayed" if sample.temporary else "failed")
    suppressed = sorted(s["email"] for s in tenant.get("/suppressions").json()["data"])
    assert suppressed == sorted(a for a in sent_to if bounce_corpus.expected_class(name, a)[0] == "permanent")
    status = tenant.get(f"/email/{message_id}/status").json()["data"]["status"]
    assert status == ("delivered" if sample.temporary else "bounced")


@pytest.mark.parametrize("name", WITHOUT_ADDRESS)
def test_a_sample_that_names_no_known_address_is_kept_and_bounces_nobody(service, trips, name):
    tenant, message_id, report_id = trips[name]
    report = report_done(service, report_id)
    assert report["status"] in ("unparseable", "unmatched") and report["message_id"] == message_id
    assert tenant.get("/bounces").json()["data"] == [] and tenant.get("/suppressions").json()["data"] == []
