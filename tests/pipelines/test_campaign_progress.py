"""A campaign's progress over time, from its messages' histories."""

from pipelines.campaigns.progress import SERIES, first_times, progress


def _at(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}Z"


BASE_MS = 1767225600000  # 2026-01-01T00:00:00Z


def test_a_message_counts_once_per_kind_at_its_first_time_and_implies_what_came_before():
    message = {"history": [{"status": "queued", "at": _at(0)}, {"status": "deferred", "at": _at(1)},
                           {"status": "deferred", "at": _at(2)}, {"status": "clicked", "at": _at(5)},
                           {"status": "delivered", "at": _at(3)}],
               "last_complaint_at": _at(9)}
    assert first_times(message) == {"deferred": BASE_MS + 1000, "delivered": BASE_MS + 3000, "sent": BASE_MS + 3000,
                                    "clicked": BASE_MS + 5000, "opened": BASE_MS + 5000,
                                    "complained": BASE_MS + 9000}


def test_progress_is_cumulative_per_kind_and_ends_at_the_last_event_or_later():
    messages = [{"history": [{"status": "sent", "at": _at(s)}, {"status": "delivered", "at": _at(s + 1)}]}
                for s in (4, 2, 6)] + [{"history": [{"status": "bounced", "at": _at(7)}]}]
    found = progress(messages, BASE_MS, BASE_MS + 5000)
    assert set(found.series) == set(SERIES) and found.messages == 4
    assert found.series["sent"] == [(BASE_MS + 2000, 1), (BASE_MS + 4000, 2), (BASE_MS + 6000, 3)]
    assert found.final("delivered") == 3 and found.final("bounced") == 1 and found.final("opened") == 0
    assert found.end_ms == BASE_MS + 7000  # the last event, after the given end
