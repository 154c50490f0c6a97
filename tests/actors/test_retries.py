"""The retry policy table (actors/retries.py): every actor takes its queue's policy, and on
a real RabbitMQ broker a job that raises a permanent error runs once and is dead-lettered
at once, while a transient error is retried."""

from __future__ import annotations

import threading

import dramatiq
import pytest
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.middleware import Retries

from actors.jobs import ACTORS
from actors.retries import FAILED_JOBS, RETRY_POLICY, ReportFailedJobs, job_options
from pipelines.core.errors import NotFound, PermanentJobError
from tests.support import services


def test_every_actor_takes_its_queues_policy_from_the_table():
    assert {actor.queue_name for actor in ACTORS} == set(RETRY_POLICY)
    for actor in ACTORS:
        expected = job_options(actor.queue_name)
        assert {name: actor.options[name] for name in ("max_retries", "min_backoff", "max_backoff", "throws")} == {
            name: expected[name] for name in ("max_retries", "min_backoff", "max_backoff", "throws")}, actor.actor_name


@pytest.fixture
def broker():
    vhost, url = services.create_vhost()
    broker = RabbitmqBroker(url=url, confirm_delivery=True)
    broker.add_middleware(ReportFailedJobs(), before=Retries)
    yield broker
    broker.close()
    services.delete_vhost(vhost)


def _failed_count(queue: str, reason: str) -> float:
    return FAILED_JOBS.labels(queue, reason)._value.get()


def _run(broker, actor, *args, until: threading.Event):
    worker = dramatiq.Worker(broker, worker_threads=1, worker_timeout=100)
    worker.start()
    try:
        actor.send(*args)
        assert until.wait(30), "the job never reached its end"
        broker.join(actor.queue_name, timeout=30_000)  # every attempt settled, none left delayed
    finally:
        worker.stop()


def _dead_lettered(broker, queue: str) -> int:
    return broker.get_queue_message_counts(queue)[2]  # (ready, delayed, dead-lettered)


@pytest.mark.parametrize("error", [PermanentJobError("the report is gone"), NotFound("No such message.")])
def test_a_permanent_error_ends_the_job_at_once_in_the_dead_letter_queue(broker, error):
    attempts = []
    done = threading.Event()

    @dramatiq.actor(broker=broker, actor_name="permanent_" + type(error).__name__, **job_options("imports"))
    def fails_for_good():
        attempts.append(1)
        done.set()
        raise error

    before = _failed_count("imports", "permanent")
    _run(broker, fails_for_good, until=done)
    assert len(attempts) == 1, "a permanent error is not retried"
    assert _dead_lettered(broker, "imports") == 1
    assert _failed_count("imports", "permanent") == before + 1


def test_a_transient_error_is_retried_and_its_success_dead_letters_nothing(broker):
    attempts = []
    done = threading.Event()

    @dramatiq.actor(broker=broker, actor_name="transient_once", **{**job_options("imports"), "min_backoff": 10})
    def fails_once():
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("store away for a moment")
        done.set()

    _run(broker, fails_once, until=done)
    assert len(attempts) == 2
    assert _dead_lettered(broker, "imports") == 0
