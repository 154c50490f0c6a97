"""The real services a test run needs, started once per session.

- the store: POSTROOM_TEST_MONGODB_URL if set, else the embedded nx-27017 in a temp dir;
  every run uses its own database name;
- RabbitMQ on 127.0.0.1:5672, with a vhost of this run's own (deleted at the end);
- the front, a worker pool and the scheduler as real `postroom` processes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from ops import embedded_store

AMQP_HOST, AMQP_PORT = "127.0.0.1", 5672


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def ensure_rabbitmq() -> None:
    if _port_open(AMQP_HOST, AMQP_PORT):
        return
    server = shutil.which("rabbitmq-server")
    if server is None:
        raise RuntimeError("RabbitMQ is not running on 127.0.0.1:5672 and rabbitmq-server is not "
                           "installed; install it (apt-get install rabbitmq-server) and start it "
                           "with `rabbitmq-server -detached`.")
    subprocess.run([server, "-detached"], check=False)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _port_open(AMQP_HOST, AMQP_PORT):
            time.sleep(2)
            return
        time.sleep(0.5)
    raise RuntimeError("RabbitMQ did not start on 127.0.0.1:5672; start it with `rabbitmq-server -detached`.")


def _rabbitmqctl(*args: str) -> None:
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        raise RuntimeError("rabbitmqctl not found; the tests create a vhost per run with it.")
    subprocess.run([ctl, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# RabbitMQ's management API answers in milliseconds where each rabbitmqctl call starts an
# Erlang VM (3-7 s on a loaded 2-core box, three calls a private stack); ops/test.sh enables
# the plugin, and rabbitmqctl remains the fallback where it is off.
MANAGEMENT_URL = os.environ.get("POSTROOM_TEST_RABBITMQ_MANAGEMENT_URL", "http://127.0.0.1:15672")


def _management(method: str, path: str, body: dict | None = None) -> bool:
    """True when the management API did it; False when it is not there."""
    try:
        answer = httpx.request(method, f"{MANAGEMENT_URL}/api/{path}", json=body, auth=("guest", "guest"), timeout=30)
    except httpx.HTTPError:
        return False
    answer.raise_for_status()
    return True


def create_vhost() -> tuple[str, str]:
    ensure_rabbitmq()
    vhost = f"postroom-test-{uuid.uuid4().hex[:10]}"
    if _management("PUT", f"vhosts/{vhost}"):
        _management("PUT", f"permissions/{vhost}/guest", {"configure": ".*", "write": ".*", "read": ".*"})
    else:
        _rabbitmqctl("add_vhost", vhost)
        _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    return vhost, f"amqp://guest:guest@{AMQP_HOST}:{AMQP_PORT}/{vhost}"


def delete_vhost(vhost: str) -> None:
    try:
        if not _management("DELETE", f"vhosts/{vhost}"):
            _rabbitmqctl("delete_vhost", vhost)
    except (RuntimeError, subprocess.CalledProcessError, httpx.HTTPError):
        pass


def postroom_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ops.cli", *args]


def run_postroom(env: dict, *args: str, expect: int = 0, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run a `postroom` command to its end (given `stdin`); its exit code must be `expect`."""
    result = subprocess.run(postroom_command(*args), env=env, capture_output=True, text=True, timeout=120,
                            input=stdin)
    assert result.returncode == expect, (args, result.returncode, result.stdout, result.stderr[-2000:])
    return result


@contextlib.contextmanager
def another_front(name: str, env: dict, log_dir: Path, answers: tuple[int, ...] = (200,)):
    """A second front process on a free port with its own environment; yields its base URL."""
    port = embedded_store.free_port()
    front = Process(name, ["front", "--port", str(port)], env, log_dir)
    try:
        base_url = f"http://127.0.0.1:{port}"
        wait_healthy(base_url, front, answers=answers)
        yield base_url
    finally:
        front.stop()


class Process:
    """A `postroom` subprocess whose output goes to a log file we can show on failure."""

    def __init__(self, name: str, args: list[str], env: dict, log_dir: Path):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(postroom_command(*args), env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=embedded_store.stop_with_parent)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10) -> None:
        stop_all([self], timeout)

    def _signal(self, number: int) -> None:
        try:
            os.killpg(self.proc.pid, number)
        except ProcessLookupError:
            pass


def stop_all(processes, timeout: float = 10) -> None:
    """SIGTERM to every process group at once, then SIGKILL to what is still running after
    `timeout`: a stack's processes shut down side by side, not one after another."""
    running = [p for p in processes if p.proc.poll() is None]
    for process in running:
        process._signal(15)
    deadline = time.monotonic() + timeout
    for process in running:
        try:
            process.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process._signal(9)
            process.proc.wait()
    for process in processes:
        process.log.close()


def wait_healthy(base_url: str, process: Process, timeout: float = 60, answers: tuple[int, ...] = (200,)) -> None:
    """Until GET /health answers one of `answers` (503 too, for a front meant to be degraded)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if not process.alive():
            raise RuntimeError(f"{process.name} exited:\n{process.tail()}")
        try:
            response = httpx.get(f"{base_url}/api/v1/health", timeout=2)
            if response.status_code in answers:
                return
            last = response.text
        except httpx.HTTPError as error:
            last = str(error)
        time.sleep(0.2)
    raise RuntimeError(f"{process.name} did not become healthy: {last}\n{process.tail()}")
