"""The loop long-running processes run on (actors/event_loop): uvloop's by default, in the
front and scheduler (`run`) and on a worker's async-actor thread (the AsyncIO middleware);
POSTROOM_EVENT_LOOP=asyncio keeps asyncio's."""

from __future__ import annotations

import asyncio

import dramatiq
import uvloop
from dramatiq.brokers.stub import StubBroker

from actors import event_loop


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_processes_run_on_uvloop_by_default(monkeypatch):
    monkeypatch.delenv("POSTROOM_EVENT_LOOP", raising=False)
    assert issubclass(event_loop.run(_loop_type()), uvloop.Loop)


def test_the_operator_can_keep_asyncios_loop(monkeypatch):
    monkeypatch.setenv("POSTROOM_EVENT_LOOP", "asyncio")
    loop_type = event_loop.run(_loop_type())
    assert not issubclass(loop_type, uvloop.Loop)
    assert issubclass(loop_type, asyncio.BaseEventLoop)


def test_a_workers_async_actors_run_on_uvloop(monkeypatch):
    monkeypatch.delenv("POSTROOM_EVENT_LOOP", raising=False)
    broker = StubBroker()
    broker.add_middleware(event_loop.AsyncIO())
    seen: list[type] = []

    async def record() -> None:
        seen.append(type(asyncio.get_running_loop()))

    actor = dramatiq.actor(record, broker=broker, queue_name="loop_check", max_retries=0)
    worker = dramatiq.Worker(broker, worker_timeout=100)
    worker.start()
    try:
        actor.send()
        broker.join("loop_check", fail_fast=True)
        worker.join()
    finally:
        worker.stop()
    assert len(seen) == 1 and issubclass(seen[0], uvloop.Loop)
