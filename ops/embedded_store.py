"""The embedded store: nx-27017 (MongoDB wire protocol over SQLite) on a Unix socket,
DATA_DIR/store.sock, one SQLite file per database under DATA_DIR/store, so data survives
restarts. nx-27017 has no authentication, so it is not put on a TCP port (any user of the
machine could connect there): the socket sits in the owner-only data directory and the
store checks each connection's user besides (ops/store_process.py). PyMongo reaches it
as `mongodb://%2F...%2Fstore.sock`.

Processes started one by one (`postroom front`, `worker`, `scheduler`, the CLI commands,
`up`) share one store per DATA_DIR: the first starts it (detached, except under `up`) and
records it in DATA_DIR/store.json; the others find it answering on the socket. Who starts
it is decided under a lock (DATA_DIR/store.lock), so commands started at once never
start two.

Everything under DATA_DIR is private to the user running postroom (contacts, messages,
keys): the directories are made 0700 and the store process runs with umask 077, so its
files are created 0600 (files an earlier version left readable are narrowed at start)."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

from pymongo import MongoClient

START_TIMEOUT_SECONDS = 20.0
# The longest path a Unix socket address takes on Linux (sun_path, with its NUL).
_MAX_SOCKET_PATH_BYTES = 107
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


def answers(url: str) -> bool:
    """Whether a store answers at `url` (a socket URL, without a database) within half a second."""
    path = urllib.parse.unquote(url.removeprefix("mongodb://"))
    if path.endswith(".sock") and not os.path.exists(path):
        return False  # no store has started there: no need to wait for one to answer
    client = MongoClient(url, serverSelectionTimeoutMS=500, connectTimeoutMS=500)
    try:
        client.admin.command("ping")
        return True
    except Exception:  # not up (yet)
        return False
    finally:
        client.close()


def socket_url(data_dir: Path) -> str:
    """The store's URL for `data_dir`: its Unix socket, as PyMongo takes one."""
    path = str(data_dir.resolve() / "store.sock")
    if len(path.encode()) > _MAX_SOCKET_PATH_BYTES:
        raise RuntimeError(f"the data dir's path is too long for the store's socket ({path}: at most "
                           f"{_MAX_SOCKET_PATH_BYTES} bytes); use a shorter POSTROOM_DATA_DIR or set "
                           "POSTROOM_MONGODB_URL")
    return "mongodb://" + urllib.parse.quote(path, safe="")


def start(data_dir: Path, port: int | None = None, *, detached: bool = False) -> tuple[subprocess.Popen, str]:
    """Start a store process for `data_dir`; returns (process, url) once it answers.
    `port`: on that loopback TCP port instead of the socket, open to every local user;
    only for tests that must put a proxy in front of the store or restart it there."""
    private_dir(data_dir)
    store_dir = private_dir((data_dir / "store").resolve())
    for existing in store_dir.iterdir():
        if existing.is_file():
            existing.chmod(PRIVATE_FILE_MODE)
    if port is None:
        url = socket_url(data_dir)
        if answers(url):  # a second one would see the first answer and pass for started
            raise RuntimeError(f"a store already serves {data_dir}")
        listen = ["--socket", str(data_dir.resolve() / "store.sock")]
    else:
        url = f"mongodb://127.0.0.1:{port}"
        listen = ["--host", "127.0.0.1", "--port", str(port)]
    log = os.fdopen(_private_file(data_dir / "store.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab")
    process = subprocess.Popen(
        _command() + ["--data-dir", str(store_dir), *listen,
                      "--log-file", str(data_dir.resolve() / "store.log"),
                      "--pid-file", str(data_dir.resolve() / "store.pid")],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=detached, preexec_fn=None if detached else stop_with_parent)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the embedded store exited at start; see {data_dir / 'store.log'}")
        if answers(url):
            return process, url
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the embedded store did not answer in time")


def stop_with_parent() -> None:
    """Run in a child before exec: SIGTERM it when its parent dies (Linux's parent-death
    signal), so a store, stack or test process killed with SIGKILL leaves no child working
    on for minutes; the child then stops as on any deploy."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


PR_SET_PDEATHSIG = 1


@contextlib.contextmanager
def _start_lock(data_dir: Path):
    """Held while a command looks for the store and starts it: of commands started at once
    on one DATA_DIR, one starts the store and the others find it."""
    fd = _private_file(data_dir / "store.lock", os.O_WRONLY | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def running_or_start(data_dir: Path, *, detached: bool) -> tuple[subprocess.Popen | None, str]:
    """The store for `data_dir`: (None, url) when one already answers, else one started
    now, recorded in store.json, (process, url). `detached`: it outlives this process (a
    CLI command's); else this process owns it and stops it (`up`)."""
    private_dir(data_dir)
    url = socket_url(data_dir)
    with _start_lock(data_dir):
        if answers(url):
            return None, url
        process, url = start(data_dir, detached=detached)
        record(data_dir, url, process.pid)
        return process, url


def ensure_running(data_dir: Path) -> str:
    """The shared store for `data_dir`: the one answering on its socket, else a detached one."""
    return running_or_start(data_dir, detached=True)[1]


def record(data_dir: Path, url: str, pid: int) -> None:
    """Which process serves the store of this DATA_DIR (its pid, to stop it), and where."""
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
