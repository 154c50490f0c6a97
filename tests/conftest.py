"""Session-wide real services. Nothing here is mocked: the store speaks the MongoDB wire
protocol, RabbitMQ is the real broker, mail goes to a real SMTP receiver, and the front,
worker and scheduler are real `postroom` processes talking to them."""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

import pytest

from ops import embedded_store
from tests.support import services
from tests.support.harness import Service, StoreThread
from tests.support.smtp_sink import SmtpSink


@pytest.fixture(scope="session")
def run_dir():
    with tempfile.TemporaryDirectory(prefix="postroom-test-") as path:
        yield Path(path)


@pytest.fixture(scope="session")
def store_url(run_dir):
    url = os.environ.get("POSTROOM_TEST_MONGODB_URL")
    if url:
        yield url
        return
    process, url = embedded_store.start(run_dir)
    yield url
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="session")
def database_name():
    return f"postroom_test_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def amqp():
    vhost, url = services.create_vhost()
    yield url
    services.delete_vhost(vhost)


@pytest.fixture(scope="session")
def smtp_sink():
    sink = SmtpSink().start()
    yield sink
    sink.stop()


@pytest.fixture(scope="session")
def dns_server():
    from tests.support.dns_server import LoopbackDns
    server = LoopbackDns(embedded_store.free_port()).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def service_env(run_dir, store_url, database_name, amqp, smtp_sink, dns_server):
    port = embedded_store.free_port()
    env = dict(os.environ)
    env.update({
        "POSTROOM_MONGODB_URL": store_url,
        "POSTROOM_MONGODB_DATABASE": database_name,
        "POSTROOM_AMQP_URL": amqp,
        "POSTROOM_SMTP_URL": smtp_sink.url,
        "POSTROOM_BASE_URL": f"http://127.0.0.1:{port}",
        "POSTROOM_SECRET_KEY": "test-secret-" + uuid.uuid4().hex,
        "POSTROOM_DATA_DIR": str(run_dir / "data"),
        "POSTROOM_ALLOW_PRIVATE_TARGETS": "1",
        "POSTROOM_SCHEDULER_INTERVAL_SECONDS": "0.2",
        "POSTROOM_DNS_RESOLVER": dns_server.address,
        "POSTROOM_INBOUND_PORT": str(embedded_store.free_port()),
        "POSTROOM_WEBHOOK_RETRY_SCALE": "0.01",
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    })
    return env, port


@pytest.fixture(scope="session")
def service(service_env, run_dir, store_url, database_name, smtp_sink):
    env, port = service_env
    log_dir = run_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    front = services.Process("front", ["front", "--port", str(port)], env, log_dir)
    worker = services.Process("worker", ["worker", "-p", "1", "-t", "8"], env, log_dir)
    scheduler = services.Process("scheduler", ["scheduler"], env, log_dir)
    inbound = services.Process("inbound", ["inbound"], env, log_dir)
    base_url = f"http://127.0.0.1:{port}"
    store = StoreThread(store_url, database_name)
    svc = Service(base_url=base_url, env=env, store=store, log_dir=log_dir, smtp=smtp_sink)
    try:
        services.wait_healthy(base_url, front)
        yield svc
    finally:
        svc.close()
        for process in (inbound, scheduler, worker, front):
            process.stop()
        store.close()


@pytest.fixture
def tenant(service):
    return service.tenant()
