"""The retry table: spans more than a day, short waits ride the broker, long ones wait
in the store, and the test speed-up scales waits without changing which path they take."""

import pytest

from pipelines.messages import retry_schedule as schedule


def test_schedule_spans_more_than_a_day_and_covers_an_hour_long_outage():
    assert sum(schedule.RETRY_DELAYS_SECONDS) >= 24 * 3600
    assert sum(schedule.RETRY_DELAYS_SECONDS[:6]) > 3600  # attempts keep coming after an hour down


def test_waits_grow_and_follow_the_documented_table():
    delays = [schedule.after_failure(n).delay_seconds for n in range(1, schedule.MAX_ATTEMPTS)]
    assert delays == [10, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 43200, 86400]
    assert delays == sorted(delays)


def test_short_waits_ride_the_broker_and_long_ones_wait_in_the_store():
    assert [schedule.after_failure(n).via_broker for n in (1, 2, 3, 4)] == [True, True, False, False]


def test_scale_shrinks_waits_but_keeps_their_path():
    fast = schedule.after_failure(3, scale=0.01)
    assert fast.delay_seconds == pytest.approx(1.2)
    assert fast.via_broker is False


def test_gives_up_after_the_last_attempt():
    assert schedule.MAX_ATTEMPTS == 12
    assert schedule.after_failure(schedule.MAX_ATTEMPTS - 1) is not None
    assert schedule.after_failure(schedule.MAX_ATTEMPTS) is None


def test_attempt_count_starts_at_one():
    with pytest.raises(ValueError):
        schedule.after_failure(0)
