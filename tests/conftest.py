"""Session-wide real services. Nothing here is mocked: the store speaks the MongoDB wire
protocol, RabbitMQ is the real broker, mail goes to a real SMTP receiver, and the front,
worker and scheduler are real `postroom` processes talking to them.

Two tiers (`-m e2e`, `-m "not e2e"`): a test that needs processes — the session's front,
worker, scheduler and inbound (`live_service`), a stack or a command of its own, a worker's
mail or events — is `e2e`. tests/front talk to the same app in the test process instead
(`front_in_process`, tests/front/conftest.py) unless marked `e2e`. Every fixture here is
lazy: a run of the fast tier starts the store and no `postroom` process."""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

import pytest

from mongo.indexes import prepare_store
from ops import embedded_store
from pipelines.core.settings import Settings
from tests.support import quiet_turns, services
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
def session_store(store_url, database_name):
    """The session's database through the async driver, for seeding and reading."""
    store = StoreThread(store_url, database_name)
    yield store
    store.close()


@pytest.fixture(scope="session")
def log_dir(run_dir):
    path = run_dir / "logs"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def service_processes(service_env, log_dir):
    """The session's `postroom` front, worker, scheduler and inbound, healthy."""
    env, port = service_env
    front = services.Process("front", ["front", "--port", str(port)], env, log_dir)
    worker = services.Process("worker", ["worker", "-p", "1", "-t", "8"], env, log_dir)
    scheduler = services.Process("scheduler", ["scheduler"], env, log_dir)
    inbound = services.Process("inbound", ["inbound"], env, log_dir)
    try:
        services.wait_healthy(f"http://127.0.0.1:{port}", front)
        yield
    finally:
        for process in (inbound, scheduler, worker, front):
            process.stop()


def _session_service(service_env, store, log_dir, smtp_sink, transport=None) -> Service:
    env, port = service_env
    return Service(base_url=f"http://127.0.0.1:{port}", env=env, store=store, log_dir=log_dir, smtp=smtp_sink,
                   transport=transport)


@pytest.fixture(scope="session")
def live_service(service_processes, service_env, session_store, log_dir, smtp_sink):
    """The session's service, its API reached over HTTP at the real front."""
    svc = _session_service(service_env, session_store, log_dir, smtp_sink)
    yield svc
    svc.close()


@pytest.fixture(scope="session")
def front_in_process(service_env, session_store, log_dir, smtp_sink):
    """The same service with its API answered by the front's app in this process: same
    settings, store, database and queues, same base URL (links name the real front, which
    answers them when an e2e test has started it)."""
    from tests.support.in_process import InProcessFront  # local import: loads the app only for runs that use it
    session_store.run(prepare_store)  # the indexes, as `postroom front` makes them before it serves
    front = InProcessFront(Settings.from_env(service_env[0]))
    transport = front.transport(service_env[0]["POSTROOM_BASE_URL"])
    svc = _session_service(service_env, session_store, log_dir, smtp_sink, transport=transport)
    yield svc
    svc.close()
    front.close()


@pytest.fixture(scope="session")
def service(live_service):
    """What a test talks to: the real processes (tests/front/conftest.py gives its modules
    the front in process)."""
    return live_service


@pytest.fixture
def tenant(service):
    return service.tenant()


@pytest.fixture(autouse=True)
def _processes_for_e2e(request):
    """An e2e test on the front in process still gets the session's processes (a worker to
    send its mail, the real front to follow its links)."""
    if request.node.get_closest_marker("e2e") and "service" in request.fixturenames:
        request.getfixturevalue("service_processes")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test marked `quiet` (it measures time) runs while no other test does
    (tests/support/quiet_turns.py); the rest run side by side."""
    with quiet_turns.turn(item.get_closest_marker("quiet") is not None):
        return (yield)


def pytest_collection_modifyitems(items):
    for item in items:
        if "live_service" in item.fixturenames:
            item.add_marker(pytest.mark.e2e)
    items[:] = _interleaved_by_file(items)


def _interleaved_by_file(items: list) -> list:
    """The files with processes in them (e2e) spread evenly among the fast ones, slow first:
    with `--dist loadfile --no-loadscope-reorder` (ops/test.sh) the parallel processes
    take files in this order, so a process waiting on its stack's mail leaves the CPU to
    fast files in the other, and the run ends on short files both share (xdist's own
    order, most tests first, left the few-test crash and stop files to the end, run by
    one process while the other idled); files with a `quiet` test at the very end."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    slow = [f for f, its in files.items() if any(i.get_closest_marker("e2e") for i in its)]
    fast = [f for f in files if f not in slow]
    order, per_slow = [], max(1, len(fast) // max(1, len(slow)))
    for n, name in enumerate(slow):
        order += [name, *fast[n * per_slow:(n + 1) * per_slow]]
    order += fast[len(slow) * per_slow:]
    # a file with a `quiet` test last: its test takes the room alone once the other
    # processes are done, instead of idling them mid-run (their tests in hand to finish,
    # the settle, its ~25 s) while they still have files to run
    quiet = [f for f in order if any(i.get_closest_marker("quiet") for i in files[f])]
    order = [f for f in order if f not in quiet] + quiet
    return [item for name in order for item in files[name]]
