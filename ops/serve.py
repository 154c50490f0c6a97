"""Running the processes: the front under Hypercorn, the scheduler loop, and `up`
(everything in one process, with an in-process worker)."""

from __future__ import annotations

import asyncio
import logging
import signal

import dramatiq
from hypercorn.asyncio import serve
from hypercorn.config import Config

from actors import broker as broker_setup
from actors import event_loop, gc_tuning
from front.app import asgi, create_app
from mongo.client import connect
from mongo.indexes import prepare_store
from pipelines.core.settings import Settings

from . import metrics_server
from .scheduler import run_forever

log = logging.getLogger("postroom")


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


async def _prepare_store(settings: Settings) -> None:
    client, db = connect(settings.mongodb_url, settings.mongodb_database)
    try:
        await prepare_store(db)
    finally:
        await client.close()


def _hypercorn_config(host: str, port: int) -> Config:
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    # Through the process's root handlers (ops/logs.py), not a handler of Hypercorn's own.
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 5
    return config


def _warn_plain_http_links(settings: Settings) -> None:
    if settings.base_url.startswith("http://"):
        log.warning("links in mail and forms use %s: one-click unsubscribe links are then http://, which "
                    "large mailbox providers do not follow (they want https); set POSTROOM_BASE_URL to the "
                    "https address recipients reach", settings.base_url)


async def run_front(settings: Settings, host: str, port: int, *, with_scheduler: bool = False) -> None:
    _warn_plain_http_links(settings)
    await _prepare_store(settings)
    app = create_app(settings)
    gc_tuning.settle()
    metrics_server.serve(settings.front_metrics_port, settings.metrics_host)
    stop = asyncio.Event()
    _stop_on_signals(stop)
    tasks = [serve(asgi(app), _hypercorn_config(host, port), shutdown_trigger=stop.wait)]
    if with_scheduler:
        tasks.append(run_forever(settings, stop))
    print(f"postroom front listening on http://{host}:{port} (API at /api/v1, OpenAPI at /openapi.yaml)",
          flush=True)
    await asyncio.gather(*tasks)


async def run_scheduler(settings: Settings) -> None:
    broker_setup.setup(settings)
    metrics_server.serve(settings.scheduler_metrics_port, settings.metrics_host)
    stop = asyncio.Event()
    _stop_on_signals(stop)
    print("postroom scheduler running", flush=True)
    await run_forever(settings, stop)


def run_up(settings: Settings, host: str, port: int, threads: int) -> None:
    """Front, a worker for every queue, and the scheduler, in this one process."""
    broker = broker_setup.setup(settings)
    broker_setup.declare_queues(broker)
    worker = dramatiq.Worker(broker, worker_threads=threads)
    worker.start()
    mode = "RabbitMQ" if settings.amqp_url else "in-process broker"
    mail = settings.smtp_url or f"capture outbox {settings.data_dir / 'outbox'}"
    print(f"postroom up: store {settings.mongodb_url}, {mode}, mail to {mail}", flush=True)
    try:
        event_loop.run(run_front(settings, host, port, with_scheduler=True))
    finally:
        worker.stop(timeout=5000)
        print("postroom stopped", flush=True)
