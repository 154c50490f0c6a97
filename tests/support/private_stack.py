"""A private stack for tests that must own every process: their own RabbitMQ vhost,
database, SMTP sink, front and scheduler, and workers started (and killed) by the test.
Nothing of the session's shared service consumes their queues or reads their data."""

from __future__ import annotations

import contextlib
import datetime as dt
import glob
import uuid

from ops import embedded_store
from pipelines.core.clock import utcnow
from tests.support import services
from tests.support.harness import Service, StoreThread
from tests.support.smtp_sink import SmtpSink


def faketime_library() -> str:
    """libfaketime, preloaded into a process to run it on a clock the test moves."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if not found:
        raise RuntimeError("libfaketime is missing; install Debian's `faketime` package "
                           "(ops/test.sh does when run as root).")
    return found[0]


class ControlledClock:
    """The clock of the processes started with `env()`: an offset from real time, moved by
    the test. libfaketime re-reads the file at most every second.

    A stack shared by several tests keeps one clock, which only goes forward: `begin()`
    starts a test's own time line at the offset reached so far, and `set(seconds)` then
    means that many seconds after it."""

    def __init__(self, path):
        self.path = path
        self.offset = 0  # seconds ahead of real time, as written
        self.epoch = 0
        self._write(0)

    def begin(self) -> None:
        self.epoch = self.offset

    def set(self, seconds: int) -> None:
        offset = self.epoch + seconds
        assert offset >= self.offset, "the shared clock only goes forward"
        self._write(offset)

    def now(self) -> dt.datetime:
        """What the clocked processes read as now."""
        return utcnow() + dt.timedelta(seconds=self.offset)

    def _write(self, offset: int) -> None:
        self.offset = offset
        self.path.write_text(f"{offset:+d}s\n")

    def env(self) -> dict:
        return {"LD_PRELOAD": faketime_library(), "FAKETIME_TIMESTAMP_FILE": str(self.path),
                "FAKETIME_CACHE_DURATION": "1"}


# A send lease short enough that what a killed or lost worker held is claimed again within
# seconds; it must still outlast an SMTP transaction (2 s here) and the writes that record it.
SHORT_LEASE_ENV = {"POSTROOM_SEND_LEASE_SECONDS": "8", "POSTROOM_SMTP_TIMEOUT_SECONDS": "2"}


@contextlib.contextmanager
def private_stack(service, store_url, run_dir, name: str, env: dict | None = None,
                  scheduler_env: dict | None = None, sink_options: dict | None = None, amqp_query: str = ""):
    """Yields a harness `Service` with `start_worker(name)` and `vhost`; `env` adds settings
    for every process, `scheduler_env` for the scheduler alone (e.g. a ControlledClock),
    `sink_options` configure its SMTP sink (SMTPUTF8, TLS, …); `amqp_query` is added to the
    broker URL (e.g. `heartbeat=0` for processes whose clock jumps)."""
    vhost, amqp = services.create_vhost()
    if amqp_query:
        amqp = f"{amqp}?{amqp_query}"
    sink = SmtpSink(**(sink_options or {})).start()
    port = embedded_store.free_port()
    database = f"postroom_{name}_{uuid.uuid4().hex[:8]}"
    stack_env = {**service.env, "POSTROOM_AMQP_URL": amqp, "POSTROOM_SMTP_URL": sink.url,
                 "POSTROOM_MONGODB_DATABASE": database, "POSTROOM_BASE_URL": f"http://127.0.0.1:{port}",
                 **(env or {})}
    log_dir = run_dir / database
    log_dir.mkdir()
    front = services.Process("front", ["front", "--port", str(port)], stack_env, log_dir)
    scheduler = services.Process("scheduler", ["scheduler"], {**stack_env, **(scheduler_env or {})}, log_dir)
    store = StoreThread(store_url, database)
    stack = Service(base_url=f"http://127.0.0.1:{port}", env=stack_env, store=store, log_dir=log_dir, smtp=sink)
    workers = []

    def start_worker(worker_name, queues: str | None = None):
        args = ["worker", "-p", "1", "-t", "8"] + (["--queues", queues] if queues else [])
        worker = services.Process(worker_name, args, stack_env, log_dir)
        workers.append(worker)
        return worker
    stack.start_worker = start_worker
    stack.scheduler = scheduler
    stack.vhost = vhost
    try:
        services.wait_healthy(stack.base_url, front)
        yield stack
    finally:
        stack.close()
        services.stop_all([*workers, scheduler, front], timeout=2)  # nothing to finish gracefully: the test is over
        store.close()
        sink.stop()
        services.delete_vhost(vhost)
