"""actors/publish.py hands every publish to its publishing threads: the caller's loop
keeps running meanwhile, and what the broker did not take is named."""

from __future__ import annotations

import asyncio
import threading

import pytest

from actors.publish import PublishFailed, publish, publish_chunks, publish_coalesced


class Recorder:
    """Stands in for an actor: records each job and the thread it was sent from; refuses
    the jobs whose first argument is in `refuse`."""

    queue_name = "test"

    def __init__(self, refuse=()):
        self.jobs, self.threads, self.refuse = [], set(), set(refuse)

    def send(self, *args):
        carried = set(args[0]) if isinstance(args[0], list) else {args[0]}
        if carried & self.refuse:
            raise ConnectionError("broker away")
        self.jobs.append(args)
        self.threads.add(threading.get_ident())

    def send_with_options(self, args, delay):
        self.send(*args)


def test_concurrent_publishes_all_arrive_off_the_event_loop_thread():
    actor = Recorder()

    async def burst():
        await asyncio.gather(*(publish(actor, n) for n in range(50)))
        return threading.get_ident()
    loop_thread = asyncio.run(burst())
    assert sorted(job[0] for job in actor.jobs) == list(range(50))
    assert loop_thread not in actor.threads


def test_a_failed_chunk_names_its_ids_and_every_later_one():
    actor = Recorder(refuse={"m3"})
    ids = [f"m{i}" for i in range(6)]
    with pytest.raises(PublishFailed) as failed:
        asyncio.run(publish_chunks(actor, ids, size=2))
    assert failed.value.unpublished == ["m2", "m3", "m4", "m5"]
    assert actor.jobs == [(["m0", "m1"],)]


def test_a_single_publish_failure_reaches_its_caller_with_its_cause():
    with pytest.raises(PublishFailed) as failed:
        asyncio.run(publish(Recorder(refuse={"x"}), "x"))
    assert failed.value.unpublished == ["x"]
    assert isinstance(failed.value.cause, ConnectionError) and not failed.value.refused


class SlowRecorder(Recorder):
    """Takes `pause` seconds over its first job, so that later callers find it in flight."""

    def __init__(self, refuse=(), pause=0.2):
        super().__init__(refuse)
        self.first, self.pause = threading.Event(), pause

    def send(self, *args):
        if not self.first.is_set():
            self.first.set()
            threading.Event().wait(self.pause)
        super().send(*args)


def test_ids_handed_in_while_a_publish_is_in_flight_share_the_next_jobs():
    actor = SlowRecorder()

    async def many_single_sends():
        first = asyncio.ensure_future(publish_coalesced(actor, ["m0"]))
        while not actor.first.is_set():  # the first publish has reached the broker, and waits there
            await asyncio.sleep(0.001)
        await asyncio.gather(*(publish_coalesced(actor, [f"m{n}"]) for n in range(1, 151)))
        await first
    asyncio.run(many_single_sends())
    carried = [mid for job in actor.jobs for mid in job[0]]
    assert sorted(carried) == sorted(f"m{n}" for n in range(151))  # each once
    assert [len(job[0]) for job in actor.jobs] == [1, 100, 50]  # then chunks of RENDER_CHUNK


def test_a_caller_whose_ids_were_not_published_hears_of_its_own_ids_only():
    actor = SlowRecorder(refuse={"m3"})

    async def callers():
        first = asyncio.ensure_future(publish_coalesced(actor, ["m0"]))
        while not actor.first.is_set():
            await asyncio.sleep(0.001)
        outcomes = await asyncio.gather(*(publish_coalesced(actor, [f"m{n}"]) for n in range(1, 6)),
                                        return_exceptions=True)
        await first
        return outcomes
    outcomes = asyncio.run(callers())
    # m1 … m5 went in one job, which the broker did not take: each caller is told of its own id
    assert [o.unpublished for o in outcomes] == [[f"m{n}"] for n in range(1, 6)]
    assert actor.jobs == [(["m0"],)]
