"""The sending limits as plain code, over an in-memory backend that keeps the same
contract as the store's (take adds first, reads the total, gives back the excess)."""

import asyncio
import datetime as dt
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.messages.throttle import (
    DomainLimit,
    Grant,
    Lease,
    SendLimits,
    SendThrottle,
    month_of,
    monthly_limit,
    plan_counter_id,
)


class MemoryBackend:
    def __init__(self):
        self.windows: dict[str, int] = {}
        self.slots: dict[str, dict[str, int]] = {}
        self.tokens = itertools.count()

    async def take_window(self, key, want, limit, window_seconds):
        self.windows[key] = self.windows.get(key, 0) + want
        excess = min(want, max(0, self.windows[key] - limit))
        self.windows[key] -= excess
        return Grant(want - excess, 30.0 if excess else 0.0)

    async def give_window(self, key, count, window_seconds):
        self.windows[key] -= count

    async def take_slots(self, key, want, limit, lease_seconds):
        token = str(next(self.tokens))
        held = self.slots.setdefault(key, {})
        held[token] = want
        excess = min(want, max(0, sum(held.values()) - limit))
        held[token] -= excess
        return Lease(key, token, want - excess)

    async def give_slots(self, lease, count=None):
        held = self.slots[lease.key]
        held[lease.token] -= lease.count if count is None else count


def message(i, to, key="k1", kind="transactional"):
    return {"_id": f"m{i}", "to": [to], "key_id": key, "kind": kind}


def run(coro):
    return asyncio.run(coro)


def test_a_key_gets_only_its_email_rate_and_the_rest_waits():
    backend = MemoryBackend()
    msgs = [message(i, f"u{i}@a.example") for i in range(5)]
    result = run(SendThrottle(backend).admit(msgs, SendLimits(key_rate_per_minute={"k1": 3})))
    assert [m["_id"] for m in result.admitted] == ["m0", "m1", "m2"]
    assert [m["_id"] for m in result.held] == ["m3", "m4"]
    assert 1 <= result.retry_after_seconds <= 60
    again = run(SendThrottle(backend).admit(result.held, SendLimits(key_rate_per_minute={"k1": 3})))
    assert again.admitted == [] and len(again.held) == 2


def test_campaign_mail_does_not_count_against_an_api_key():
    msgs = [message(i, f"u{i}@a.example", kind="campaign") for i in range(5)]
    result = run(SendThrottle(MemoryBackend()).admit(msgs, SendLimits(key_rate_per_minute={"k1": 1})))
    assert len(result.admitted) == 5


def test_a_domain_cap_holds_only_that_domains_mail():
    msgs = [message(i, f"u{i}@slow.example") for i in range(4)] + [message(9, "x@fast.example")]
    limits = SendLimits(domains={"slow.example": DomainLimit(rate_per_minute=2)})
    result = run(SendThrottle(MemoryBackend()).admit(msgs, limits))
    assert sorted(m["_id"] for m in result.admitted) == ["m0", "m1", "m9"]


def test_concurrency_leases_are_given_back_after_sending():
    backend = MemoryBackend()
    throttle = SendThrottle(backend)
    limits = SendLimits(default_domain=DomainLimit(concurrency=2))
    msgs = [message(i, f"u{i}@a.example") for i in range(3)]
    first = run(throttle.admit(msgs, limits))
    assert len(first.admitted) == 2 and len(first.held) == 1 and first.retry_after_seconds == 1
    blocked = run(throttle.admit(first.held, limits))
    assert blocked.admitted == []
    run(throttle.release(first))
    later = run(throttle.admit(first.held, limits))
    assert len(later.admitted) == 1


def test_what_a_held_message_took_from_other_limits_is_given_back():
    backend = MemoryBackend()
    limits = SendLimits(key_rate_per_minute={"k1": 10},
                        domains={"slow.example": DomainLimit(rate_per_minute=1)})
    msgs = [message(i, f"u{i}@slow.example") for i in range(4)]
    result = run(SendThrottle(backend).admit(msgs, limits))
    assert len(result.admitted) == 1
    assert backend.windows["key:k1"] == 1  # the three held ones did not use the key's rate


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["k1", "k2"]), st.sampled_from(["a.example", "b.example"])),
                min_size=1, max_size=40),
       st.integers(1, 10), st.integers(1, 10), st.integers(1, 5))
def test_no_limit_is_ever_exceeded_over_repeated_chunks(plan, key_rate, domain_rate, concurrency):
    backend = MemoryBackend()
    throttle = SendThrottle(backend)
    limits = SendLimits(key_rate_per_minute={"k1": key_rate, "k2": key_rate},
                        default_domain=DomainLimit(domain_rate, concurrency))
    msgs = [message(i, f"u{i}@{d}", key=k) for i, (k, d) in enumerate(plan)]
    admitted = []
    for start in range(0, len(msgs), 7):
        result = run(throttle.admit(msgs[start:start + 7], limits))
        assert len(result.admitted) + len(result.held) == len(msgs[start:start + 7])
        for domain in ("a.example", "b.example"):
            assert sum(backend.slots.get(f"domain:{domain}", {}).values()) <= concurrency
        run(throttle.release(result))
        admitted += result.admitted
    for key in ("k1", "k2"):
        assert sum(1 for m in admitted if m["key_id"] == key) <= key_rate
    for domain in ("a.example", "b.example"):
        assert sum(1 for m in admitted if m["to"][0].endswith(domain)) <= domain_rate


def test_the_plan_limit_comes_from_the_workspace_or_the_default():
    assert monthly_limit({"monthly_email_limit": 5}, 100) == 5
    assert monthly_limit({"monthly_email_limit": None}, 100) == 100
    assert monthly_limit({}, 0) == 0
    assert plan_counter_id("ws", month_of(dt.datetime(2026, 3, 9))) == "ws:2026-03"
