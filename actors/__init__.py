"""Dramatiq actors, one module per queue; `actors/jobs.py` lists them all.

An actor module can be imported at any time: until `actors.broker.setup(settings)` binds
every actor to the process's broker, actors hang off a placeholder that refuses to
enqueue (rather than Dramatiq's default of a RabbitMQ broker on localhost)."""

import dramatiq
from dramatiq.brokers.stub import StubBroker


class UnboundBroker(StubBroker):
    def enqueue(self, message, *, delay=None):
        raise RuntimeError("actors.broker.setup(settings) has not been called in this process")


if dramatiq.broker.global_broker is None:
    dramatiq.set_broker(UnboundBroker())
