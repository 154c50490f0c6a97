"""Broker set-up: RabbitMQ with publisher confirms, or an in-process stub for `postroom up`
with nothing configured. Queue names are stable; operators see them in RabbitMQ."""

from __future__ import annotations

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Retries

from pipelines.core.settings import Settings

from . import runtime
from .event_loop import AsyncIO
from .heartbeat import CloseResources, Heartbeat
from .jobs import ACTORS, BrokerPublisher
from .render_pool import StartRenderPool
from .retries import ReportFailedJobs

# One queue per concern (the README's "Processes, and scaling workers per queue").
QUEUES = {
    "campaigns": "fans a campaign out into recipient batches",
    "render": "turns messages into personalised, signed MIME (and sends it, in a worker serving send too)",
    "send": "delivers rendered MIME over pooled SMTP under throttles",
    "bounces": "parses and applies DSN / ARF reports",
    "inbound": "authenticates, parses and routes mail received at workspaces' inbound addresses",
    "webhooks": "delivers outbox events to webhook subscriptions, signed",
    "automations": "advances automation runs step by step",
    "imports": "runs contact imports sent through the API",
}

_broker: dramatiq.Broker | None = None


def setup(settings: Settings) -> dramatiq.Broker:
    """Create and install the process's broker (once). Returns the existing one if called again."""
    global _broker
    if _broker is not None:
        return _broker
    if settings.amqp_url:
        broker: dramatiq.Broker = RabbitmqBroker(url=settings.amqp_url, confirm_delivery=True)
    else:
        broker = StubBroker()
        broker.emit_after("process_boot")
    broker.add_middleware(AsyncIO())
    broker.add_middleware(Heartbeat())  # after AsyncIO: it beats from that loop
    broker.add_middleware(CloseResources())  # after AsyncIO: its after_worker_shutdown runs first, on a live loop
    broker.add_middleware(StartRenderPool())
    broker.add_middleware(ReportFailedJobs(), before=Retries)  # its after_ hook runs after Retries decided
    for actor in ACTORS:  # declared on the placeholder at import (actors/__init__.py)
        actor.broker = broker
        broker.declare_actor(actor)
    dramatiq.set_broker(broker)
    runtime.configure(settings, BrokerPublisher(settings))
    _broker = broker
    return broker


def declare_queues(broker: dramatiq.Broker) -> None:
    for name in QUEUES:
        broker.declare_queue(name)
