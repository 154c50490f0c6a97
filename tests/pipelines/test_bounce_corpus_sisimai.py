"""Sisimai's real-world samples (tests/support/sisimai_corpus.py) through the parsing
pipeline as the `bounces` actor runs it: each is understood, bounces exactly the
recipients Sisimai names (never a bystander, never the notice's own sender), each with the
class Sisimai's own reason means; the known differences are listed, not hidden.
tests/e2e/test_inbound_bounce_corpus_sisimai.py sends every sample through the port."""

import pytest

from pipelines.bounces.parsing import match, parse_report
from tests.support import sisimai_corpus
from tests.support.sisimai_corpus import EXPECTED, KNOWN_MISSES, MID, expected_class

BYSTANDER = "bystander@postroom-corpus.example"
CASES = [(name, recipient, reason) for name, expected in sorted(EXPECTED.items()) for recipient, reason in expected]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_sample_bounces_exactly_the_recipients_sisimai_names(name):
    sample = next(s for s in sisimai_corpus.samples() if s.name == name)
    report = parse_report(sample.raw, verp_message_id=MID)
    assert report is not None and report.message_id == MID, name
    recipients = [r for r, _ in sample.expected]
    matched = match(report.bounces, [*recipients, BYSTANDER])
    assert sorted(b.email for b in matched.bounces) == sorted(recipients)
    assert match(report.bounces, [BYSTANDER]).bounces == []


@pytest.mark.parametrize("name, recipient, reason", [
    pytest.param(*case, marks=pytest.mark.xfail(strict=True, reason="known difference (sisimai_corpus.KNOWN_MISSES)"))
    if case[:2] in KNOWN_MISSES else case for case in CASES])
def test_each_failure_is_classified_as_sisimais_reason_means(name, recipient, reason):
    sample = next(s for s in sisimai_corpus.samples() if s.name == name)
    [bounce] = match(parse_report(sample.raw, verp_message_id=MID).bounces, [recipient]).bounces
    assert (bounce.type, bounce.category) == expected_class(reason), bounce


def test_the_family_table_is_the_one_docs_bounces_md_shows():
    table = sisimai_corpus.score()
    expected = sum(c["expected"] for c in table.values())
    assert sum(c["attributed"] for c in table.values()) == expected
    assert sum(c["classified"] for c in table.values()) == expected - len(KNOWN_MISSES)


@pytest.mark.parametrize("name", sorted(sisimai_corpus.NOT_BOUNCES))
def test_a_sample_that_is_no_bounce_bounces_nobody(name):
    raw = (sisimai_corpus.FOLDER / f"{name}.eml").read_bytes()
    report = parse_report(raw, verp_message_id=MID)
    assert report is None or match(report.bounces, [sisimai_corpus.NOT_BOUNCES[name]]).bounces == []
