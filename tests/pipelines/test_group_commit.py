"""pipelines/group_commit: calls made while one is in flight go together in the next,
each caller answered on its own."""

from __future__ import annotations

import asyncio

import pytest

from pipelines.core import group_commit
from pipelines.core.group_commit import grouped


class Doubler:
    """A `run` that records the groups it was called with; it holds each call until
    `release` is set, so a test decides what arrives while one is in flight."""

    def __init__(self, refuse=()):
        self.calls: list[list] = []
        self.release = asyncio.Event()
        self.refuse = set(refuse)

    async def __call__(self, items: list) -> list:
        self.calls.append(list(items))
        await self.release.wait()
        if "all" in items:
            raise RuntimeError("the whole call failed")
        return [ValueError(f"refused {i}") if i in self.refuse else i * 2 for i in items]


async def _in_flight(run: Doubler) -> None:
    """Until the first call has reached `run` (a few turns of the loop)."""
    for _ in range(10):
        if run.calls:
            return
        await asyncio.sleep(0)
    raise AssertionError("the first call never started")


def test_a_lone_call_goes_at_once_and_calls_made_meanwhile_go_together():
    async def scenario():
        run = Doubler()
        first = asyncio.ensure_future(grouped("k", run, 1))
        await _in_flight(run)
        assert run.calls == [[1]]  # nothing was in flight: it went alone, at once
        rest = [asyncio.ensure_future(grouped("k", run, n)) for n in (2, 3, 4)]
        await asyncio.sleep(0)
        assert run.calls == [[1]]  # they wait for the call in flight
        run.release.set()
        return await first, await asyncio.gather(*rest), run.calls
    first, rest, calls = asyncio.run(scenario())
    assert (first, rest) == (2, [4, 6, 8])
    assert calls == [[1], [2, 3, 4]]


def test_each_caller_sees_its_own_answer_or_failure():
    async def scenario():
        run = Doubler(refuse={3})
        run.release.set()
        return await asyncio.gather(*(grouped("k", run, n) for n in (1, 2, 3, 4)), return_exceptions=True)
    answers = asyncio.run(scenario())
    assert answers[:2] == [2, 4] and answers[3] == 8
    assert isinstance(answers[2], ValueError) and str(answers[2]) == "refused 3"


def test_a_failed_call_fails_everyone_in_it_and_nobody_after_it():
    async def scenario():
        run = Doubler()
        first = asyncio.ensure_future(grouped("k", run, 1))
        await _in_flight(run)
        doomed = asyncio.gather(grouped("k", run, "all"), grouped("k", run, 5), return_exceptions=True)
        run.release.set()
        await first
        outcome = await doomed
        return outcome, await grouped("k", run, 6)
    (failed_all, failed_five), after = asyncio.run(scenario())
    assert isinstance(failed_all, RuntimeError) and isinstance(failed_five, RuntimeError)
    assert after == 12


def test_keys_are_grouped_apart_and_forgotten_when_idle():
    async def scenario():
        a, b = Doubler(), Doubler()
        a.release.set()
        b.release.set()
        answers = await asyncio.gather(grouped("a", a, 1), grouped("b", b, 10), grouped("a", a, 2))
        return answers, a.calls, b.calls, dict(group_commit._groups.get(asyncio.get_running_loop(), {}))
    answers, a_calls, b_calls, left = asyncio.run(scenario())
    assert answers == [2, 20, 4]
    assert sorted(x for call in a_calls for x in call) == [1, 2] and b_calls == [[10]]
    assert left == {}


def test_a_caller_that_gives_up_does_not_disturb_the_others():
    async def scenario():
        run = Doubler()
        first = asyncio.ensure_future(grouped("k", run, 1))
        await _in_flight(run)
        impatient = asyncio.ensure_future(grouped("k", run, 2))
        patient = asyncio.ensure_future(grouped("k", run, 3))
        await asyncio.sleep(0)
        impatient.cancel()
        run.release.set()
        return await first, await patient, impatient.cancelled()
    assert asyncio.run(scenario()) == (2, 6, True)


def test_run_must_answer_every_caller():
    async def scenario():
        async def short(items):
            return items[:-1]
        return await asyncio.gather(grouped("k", short, 1), return_exceptions=True)
    (outcome,) = asyncio.run(scenario())
    assert isinstance(outcome, RuntimeError) and "answered 0 of 1" in str(outcome)


@pytest.mark.parametrize("items", [[1], [1, 2, 3]])
def test_answers_come_back_in_the_order_asked(items):
    async def scenario():
        run = Doubler()
        run.release.set()
        return await asyncio.gather(*(grouped("k", run, n) for n in items))
    assert asyncio.run(scenario()) == [n * 2 for n in items]
