"""The bounce corpus: the 117 real-world samples in flufl.bounce's source distribution
(tests/support/bounce_corpus.py; `ops/test.sh` fetches the sdist), every one through the
parsing pipeline exactly as the `bounces` actor runs it (`parse_report`, then `match`
against the recipients of the message the report came back for).

Per sample with an address in flufl.bounce's own table: the report is understood (it
would be recorded `parsed`), it bounces exactly those addresses of a message sent to them
and to one more recipient (never the extra one), nothing of a message sent to somebody
else, and each failure gets the classification below — reviewed sample by sample against
the notice's own words (bounce_corpus.EXPECTED). Every sample also goes through the real
inbound SMTP port, the store and the bounces actor in tests/e2e/test_inbound_bounce_corpus.py;
this file is the fast check of the parsing alone, and of the counts.

The counts are the README's ("Bounces" in the Delivery section)."""

import collections
import re
from pathlib import Path

import pytest

from pipelines.bounces.parsing import match, parse_report
from tests.support import bounce_corpus
from tests.support.bounce_corpus import EXPECTED

MID = "msg_" + "5a" * 16
OTHER_RECIPIENT = "someone-else@postroom-corpus.example"
# What each sample would end as in `inbound_reports` (a message sent to its known addresses,
# or to somebody else when flufl.bounce names none), and the understood ones by format.
COUNTS = {"parsed": 111, "unmatched": 1, "unparseable": 5}
BY_FORMAT = {"simplematch": 40, "rfc3464": 18, "yahoo": 12, "smtp32": 8, "qmail": 7, "postfix": 5,
             "simplewarning": 5, "gmail": 4, "exchange": 3, "aol": 1, "caiwireless": 1, "exim": 1, "groupwise": 1,
             "llnl": 1, "microsoft": 1, "netscape": 1, "sina": 1, "yale": 1}


def known():
    return [s.name for s in bounce_corpus.samples() if s.addresses]


def test_the_corpus_is_the_whole_sdist():
    samples = bounce_corpus.samples()
    assert len(samples) == 117
    assert set(known()) == set(EXPECTED), "every sample with a known address has a reviewed classification"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_sample_bounces_exactly_its_addresses_with_the_reviewed_classification(name):
    sample = bounce_corpus.by_name()[name]
    style = EXPECTED[name][0]
    report = parse_report(sample.raw, verp_message_id=MID)
    assert report is not None, f"{name} not understood"
    assert (report.style, report.message_id) == (style, MID)

    matched = match(report.bounces, [*sample.addresses, OTHER_RECIPIENT])
    assert sorted(b.email for b in matched.bounces) == sorted(sample.addresses)
    assert OTHER_RECIPIENT not in matched.ignored
    for bounce in matched.bounces:
        assert (bounce.type, bounce.category) == bounce_corpus.expected_class(name, bounce.email), bounce
        assert bounce.action == ("delayed" if sample.temporary else "failed")
        assert bounce.kind == "bounce" and bounce.source == "dsn"

    # the same report for a message that went to somebody else bounces nobody
    elsewhere = match(report.bounces, [OTHER_RECIPIENT])
    assert elsewhere.bounces == [] and elsewhere.ignored


def test_samples_without_a_known_address_bounce_nobody():
    for sample in bounce_corpus.samples():
        if sample.addresses:
            continue
        report = parse_report(sample.raw, verp_message_id=MID)
        assert report is None or match(report.bounces, [OTHER_RECIPIENT]).bounces == [], sample.name


def test_the_corpus_counts_are_the_readmes():
    outcomes, formats = collections.Counter(), collections.Counter()
    for sample in bounce_corpus.samples():
        report = parse_report(sample.raw, verp_message_id=MID)
        if report is None:
            outcomes["unparseable"] += 1
        elif not match(report.bounces, list(sample.addresses) or [OTHER_RECIPIENT]).bounces:
            outcomes["unmatched"] += 1
        else:
            outcomes["parsed"] += 1
            formats[report.style] += 1
    assert (dict(outcomes), dict(formats)) == (COUNTS, BY_FORMAT)
    readme = " ".join((Path(__file__).resolve().parents[2] / "docs" / "deliverability.md").read_text().split())
    assert f"{COUNTS['parsed']} of {sum(COUNTS.values())} understood" in readme
    types = collections.Counter(type_ for _, type_, _ in EXPECTED.values())
    assert f"{types['permanent']} permanent (suppressed), {types['transient']} transient, " \
           f"{types['undetermined']} undetermined" in readme
    for style, count in BY_FORMAT.items():
        assert re.search(rf"\b{re.escape(style)} {count}\b", readme), \
            f"docs/deliverability.md lacks the count of {style}"
