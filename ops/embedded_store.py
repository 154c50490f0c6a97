"""The embedded store: nx-27017 (MongoDB wire protocol over SQLite) on a free loopback
port, one SQLite file per database under DATA_DIR/store, so data survives restarts.

Processes started one by one (`postroom front`, `worker`, `scheduler`) share one store
per DATA_DIR: the first starts it detached and records its port in DATA_DIR/store.json.

Everything under DATA_DIR is private to the user running postroom (contacts, messages,
keys): the directories are made 0700 and the store process runs with umask 077, so its
files are created 0600 (files an earlier version left readable are narrowed at start)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from pymongo import MongoClient

START_TIMEOUT_SECONDS = 20.0
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """`path` created if missing, and readable by its owner only (also when it existed)."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    path.chmod(PRIVATE_DIR_MODE)
    return path


def _private_file(path: Path, flags: int) -> int:
    fd = os.open(path, flags, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)
    return fd


# Below this machine's ephemeral range (Linux default 32768-60999), so no outgoing
# connection can be handed a port we chose but have not bound yet, or one a node we
# restart must bind again (a RabbitMQ node's distribution port was seen taken that way).
_LOWEST_CHOSEN_PORT = 20000


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A loopback TCP port free now and outside the ephemeral range where possible."""
    low, high = _ephemeral_range()
    ranges = [(_LOWEST_CHOSEN_PORT, low)] if low > _LOWEST_CHOSEN_PORT + 1000 else []
    ranges += [(high + 1, 65536)] if high < 65535 else []
    for _ in range(200 if ranges else 0):
        port = random.randrange(*random.choice(ranges))
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # everything tried was taken: any free port will do
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _command() -> list[str]:
    return [sys.executable, "-m", "ops.store_process"]


def _answers(url: str) -> bool:
    client = MongoClient(url, serverSelectionTimeoutMS=500, connectTimeoutMS=500)
    try:
        client.admin.command("ping")
        return True
    except Exception:  # not up (yet)
        return False
    finally:
        client.close()


def start(data_dir: Path, port: int | None = None, *, detached: bool = False) -> tuple[subprocess.Popen, str]:
    """Start a store process for `data_dir`; returns (process, url) once it answers."""
    private_dir(data_dir)
    store_dir = private_dir((data_dir / "store").resolve())
    for existing in store_dir.iterdir():
        if existing.is_file():
            existing.chmod(PRIVATE_FILE_MODE)
    port = port or free_port()
    log = os.fdopen(_private_file(data_dir / "store.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab")
    process = subprocess.Popen(
        _command() + ["--data-dir", str(store_dir), "--host", "127.0.0.1", "--port", str(port),
                      "--log-file", str(data_dir.resolve() / "store.log"),
                      "--pid-file", str(data_dir.resolve() / "store.pid")],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=detached)
    url = f"mongodb://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the embedded store exited at start; see {data_dir / 'store.log'}")
        if _answers(url):
            return process, url
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the embedded store did not answer in time")


def ensure_running(data_dir: Path) -> str:
    """The shared store for `data_dir`: reuse the recorded one if it answers, else start one."""
    private_dir(data_dir)
    state_file = data_dir / "store.json"
    if state_file.exists():
        try:
            state = json.loads(state_file.read_text())
            if _answers(state["url"]):
                return state["url"]
        except (ValueError, KeyError):
            pass
    process, url = start(data_dir, detached=True)
    record(data_dir, url, process.pid)
    return url


def record(data_dir: Path, url: str, pid: int) -> None:
    """Let other `postroom` commands on this DATA_DIR find the running store."""
    fd = _private_file(data_dir / "store.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps({"url": url, "pid": pid}))


def forget(data_dir: Path) -> None:
    (data_dir / "store.json").unlink(missing_ok=True)


def stop_recorded(data_dir: Path) -> bool:
    state_file = data_dir / "store.json"
    if not state_file.exists():
        return False
    state = json.loads(state_file.read_text())
    try:
        os.kill(state["pid"], signal.SIGTERM)
    except ProcessLookupError:
        pass
    state_file.unlink()
    return True
