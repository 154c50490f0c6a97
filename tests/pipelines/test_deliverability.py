"""Deliverability by destination domain: what an attempt counts, and the rates per window."""

from pipelines.messages.deliverability import DAY_MS, by_domain, count_attempt, count_report
from pipelines.messages.outcomes import Outcome

TODAY_MS = 1_767_225_600_000


def test_an_attempt_counts_each_recipient_under_its_domain():
    counts: dict = {}
    count_attempt(counts, "ws", "2026-01-01T10:00:00Z", {
        "a@Gmail.com": Outcome(250, "ok"), "b@gmail.com": Outcome(550, "no such user"),
        "c@yahoo.com": Outcome(451, "later"), "d@yahoo.com": Outcome(0, "no connection", local=True),
        "e@x.org": Outcome(553, "needs SMTPUTF8", local=True)})
    assert counts == {("ws", "2026-01-01", "gmail.com"): {"sent": 2, "delivered": 1, "bounced": 1},
                      ("ws", "2026-01-01", "yahoo.com"): {"deferred": 2}}
    assert count_report("ws", "2026-01-02T00:00:00Z", "f@gmail.com", complaint=False, delayed=True) == \
        {("ws", "2026-01-02", "gmail.com"): {"deferred": 1}}


def test_rates_per_window_count_only_the_days_inside_it():
    row = {"sent": 10, "delivered": 8, "bounced": 2, "complained": 1, "deferred": 10}
    rows = [{"domain": "gmail.com", "day_ms": TODAY_MS, **row},
            {"domain": "gmail.com", "day_ms": TODAY_MS - 6 * DAY_MS, **row, "bounced": 0},
            {"domain": "gmail.com", "day_ms": TODAY_MS - 7 * DAY_MS, **row, "bounced": 10},
            {"domain": "tiny.example", "day_ms": TODAY_MS, "deferred": 1}]
    [busiest, tiny] = by_domain(rows, TODAY_MS)
    assert busiest.domain == "gmail.com" and tiny.domain == "tiny.example"
    assert busiest.windows[1].bounce_rate == 0.2 and busiest.windows[7].bounce_rate == 0.1
    assert busiest.windows[30].bounce_rate == round(12 / 30, 4)
    assert busiest.windows[1].complaint_rate == 0.125 and busiest.windows[1].deferral_rate == 0.5
    assert tiny.windows[30].bounce_rate is None and tiny.windows[30].deferral_rate == 1.0
