"""actors/publish.py hands every publish to its publishing threads: the caller's loop
keeps running meanwhile, and what the broker did not take is named."""

from __future__ import annotations

import asyncio
import threading

import pytest

from actors.publish import PublishFailed, publish, publish_chunks


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
