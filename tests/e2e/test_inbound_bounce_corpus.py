"""Real-world bounce samples from flufl.bounce's sdist (tests/support/bounce_corpus.py),
delivered as written by their MTAs to the real `postroom inbound` port, on the VERP
address of a message we actually sent to the sample's address.

Every sample goes through the port (about 0.3 s each here: a workspace, a send through
the sink, the report through the port), the 111 with an address in flufl.bounce's table
and the 6 without; tests/pipelines/test_bounce_corpus.py runs the same parsing pipeline
over them in-process, for the counts.

Each message goes to one more recipient the report does not name, and — where a sample
names several addresses — not to the last of them: the report must bounce exactly the
addresses it names that the message went to, and record the other one as ignored."""

import pytest

from tests.support import bounce_corpus
from tests.support.bounce_corpus import EXPECTED
from tests.support.inbound import report_done, sent_message, submit, verp

WITHOUT_ADDRESS = sorted(s.name for s in bounce_corpus.samples() if not s.addresses)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_world_report_through_the_inbound_port_bounces_exactly_its_recipients(service, name):
    sample = bounce_corpus.by_name()[name]
    style = EXPECTED[name][0]
    tenant = service.tenant()  # the corpus reuses addresses (userx@example.com): a workspace each
    named = [a.rsplit("@", 1)[0] + "@" + a.rsplit("@", 1)[1].lower() for a in sample.addresses]  # as the API stores
    sent_to, not_sent = (named[:-1], named[-1:]) if len(named) > 1 else (named, [])
    bystander = f"bystander-{name}@postroom-corpus.example"
    message_id = sent_message(service, tenant, [*sent_to, bystander])

    report = report_done(service, submit(service, sample.raw, verp(message_id)))

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
def test_a_sample_that_names_no_known_address_is_kept_and_bounces_nobody(service, name):
    tenant = service.tenant()
    message_id = sent_message(service, tenant, f"bystander-{name}@postroom-corpus.example")
    report = report_done(service, submit(service, bounce_corpus.by_name()[name].raw, verp(message_id)))
    assert report["status"] in ("unparseable", "unmatched") and report["message_id"] == message_id
    assert tenant.get("/bounces").json()["data"] == [] and tenant.get("/suppressions").json()["data"] == []
