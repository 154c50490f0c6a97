"""The sliding window (six 10-second buckets per minute) against the store, with the clock
passed in so the slide is exact."""

from __future__ import annotations

import uuid

import pytest

from mongo import rate_windows
from tests.support.harness import StoreThread

T0 = 1_700_000_000.0  # a multiple of 10 s: the start of a bucket


@pytest.fixture(scope="module")
def store(store_url, database_name):
    thread = StoreThread(store_url, f"{database_name}_windows")
    yield thread
    thread.close()


@pytest.fixture
def hit(store):
    subject = uuid.uuid4().hex

    def _hit(at: float, limit: int = 3, **kw):
        return store.run(rate_windows.hit, "req", subject, limit=limit, now=T0 + at, **kw)
    return _hit


def test_requests_up_to_the_limit_pass_and_count_down(hit):
    states = [hit(0.0), hit(1.0), hit(2.0)]
    assert [s.allowed for s in states] == [True, True, True]
    assert [s.remaining for s in states] == [2, 1, 0]
    assert states[0].limit == 3


def test_the_next_request_is_refused_until_the_oldest_bucket_leaves(hit):
    for at in (0.0, 1.0, 2.0):
        hit(at)
    refused = hit(5.0)
    assert not refused.allowed
    assert refused.remaining == 0
    assert refused.reset_epoch == T0 + 60
    assert refused.retry_after_seconds(T0 + 5.0) == 55
    assert not hit(59.9).allowed
    assert hit(60.0).allowed


def test_a_refused_request_does_not_use_up_the_window(hit):
    for at in (0.0, 1.0, 2.0):
        hit(at)
    for at in (3.0, 4.0, 5.0, 6.0):
        assert not hit(at).allowed
    # at 60 s the first three leave; had refusals counted, their bucket would still be full
    assert [hit(60.0 + i).allowed for i in range(3)] == [True, True, True]
    assert not hit(63.0).allowed


def test_the_window_slides_bucket_by_bucket(hit):
    assert hit(0.0).allowed        # bucket 0
    assert hit(30.0).allowed       # bucket 3
    assert hit(45.0).allowed       # bucket 4
    state = hit(50.0)
    assert not state.allowed
    assert state.reset_epoch == T0 + 60          # when bucket 0 leaves
    after_first = hit(61.0)                       # bucket 0 gone, 2 remain counted
    assert after_first.allowed and after_first.used == 3
    assert not hit(65.0).allowed
    assert hit(91.0).allowed                      # bucket 3 gone too


def test_reset_is_in_the_future_and_retry_after_at_least_one_second(hit):
    state = hit(0.0, limit=1)
    assert state.reset_epoch > T0
    refused = hit(59.99, limit=1)
    assert not refused.allowed
    assert refused.retry_after_seconds(T0 + 59.99) == 1


def test_windows_of_different_scopes_and_subjects_are_independent(store, hit):
    for at in (0.0, 1.0, 2.0):
        hit(at)
    other = store.run(rate_windows.hit, "email", "someone-else", limit=3, now=T0 + 3.0)
    assert other.allowed and other.used == 1


def test_peek_reports_without_counting(store):
    subject = uuid.uuid4().hex
    store.run(rate_windows.hit, "req", subject, limit=2, now=T0)
    for _ in range(3):
        state = store.run(rate_windows.peek, "req", subject, limit=2, now=T0 + 1)
        assert state.used == 1 and state.allowed


def test_concurrent_requests_at_the_limit_let_exactly_the_limit_through(store):
    import asyncio
    subject = uuid.uuid4().hex

    async def burst(db):
        states = await asyncio.gather(*(rate_windows.hit(db, "req", subject, limit=5, now=T0 + 1)
                                        for _ in range(20)))
        return sum(s.allowed for s in states)
    assert store.run(burst) == 5


def test_a_cost_that_does_not_fit_is_refused_whole_until_enough_has_left(hit):
    assert hit(0.0, limit=5, cost=1).allowed      # bucket 0
    assert hit(15.0, limit=5, cost=3).allowed     # bucket 1
    refused = hit(20.0, limit=5, cost=4)
    assert not refused.allowed and refused.used == 4
    # bucket 0 leaving at 60 s frees 1 (3 + 4 > 5); bucket 1 leaving at 70 s makes room
    assert refused.reset_epoch == T0 + 60 and refused.room_epoch == T0 + 70
    assert refused.retry_after_seconds(T0 + 20.0) == 50
    assert not hit(69.0, limit=5, cost=4).allowed
    assert hit(70.0, limit=5, cost=4).allowed


def test_a_cost_given_back_frees_its_units(store, hit):
    state = hit(0.0, limit=5, cost=4)
    assert state.allowed
    store.run(rate_windows.give_back, state, 4)
    assert hit(1.0, limit=5, cost=5).allowed


def test_a_subjects_windows_are_counted_together_stopping_at_the_first_refusal(store):
    subject = uuid.uuid4().hex

    def together(at: float, req: int, email: int):
        return store.run(rate_windows.hit_together, subject,
                         [rate_windows.Charge("req", req), rate_windows.Charge("email", email)], now=T0 + at)

    first = together(0.0, req=5, email=1)
    assert first["req"].allowed and first["req"].used == 1
    assert first["email"].allowed and first["email"].used == 1

    # the email window refuses: the request stays counted (it was served, with a 429)
    second = together(1.0, req=5, email=1)
    assert second["req"].allowed and second["req"].used == 2
    assert not second["email"].allowed and second["email"].used == 1
    assert second["email"].room_epoch == T0 + 60
    assert store.run(rate_windows.peek, "email", subject, limit=1, now=T0 + 2).used == 1

    # the request window refuses: the email is never considered, and not counted
    third = together(2.0, req=2, email=10)
    assert not third["req"].allowed and "email" not in third
    assert store.run(rate_windows.peek, "req", subject, limit=2, now=T0 + 3).used == 2
    assert store.run(rate_windows.peek, "email", subject, limit=10, now=T0 + 3).used == 1
    # each window is the same one `hit` counts in alone
    assert store.run(rate_windows.hit, "email", subject, limit=10, now=T0 + 4).used == 2


def test_concurrent_requests_counted_together_let_exactly_the_email_limit_through(store):
    import asyncio
    subject = uuid.uuid4().hex

    async def burst(db):
        return await asyncio.gather(*(rate_windows.hit_together(
            db, subject, [rate_windows.Charge("req", 100), rate_windows.Charge("email", 3)], now=T0 + 1)
            for _ in range(12)))
    states = store.run(burst)
    assert sum(s["email"].allowed for s in states) == 3
    assert all(s["req"].allowed for s in states)
    assert sorted(s["req"].used for s in states) == list(range(1, 13))
    assert store.run(rate_windows.peek, "email", subject, limit=3, now=T0 + 2).used == 3
