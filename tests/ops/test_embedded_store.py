"""The embedded store keeps its data private: the data directory and the store directory
are 0700 and every file the store writes is 0600, including files an earlier version left
world-readable; it listens on a Unix socket in that directory, for its own user only, and
on no TCP port. Commands started at once on one data dir share one store. The ports it
chooses (for tests that want one) stay free for a restart."""

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from ops import embedded_store

pytestmark = pytest.mark.e2e  # stores and commands of its own

NOBODY_UID = 65534


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_dir_is_owner_only_and_the_store_files_are_created_0600(tmp_path):
    data_dir = tmp_path / "var"
    (data_dir / "store").mkdir(parents=True, mode=0o755)
    data_dir.chmod(0o755)
    left_readable = data_dir / "store" / "from_an_earlier_version.db"
    left_readable.write_bytes(b"")
    left_readable.chmod(0o644)

    process, url = embedded_store.start(data_dir)
    try:
        embedded_store.record(data_dir, url, process.pid)
        with MongoClient(url) as client:
            client["private_check"].contacts.insert_one({"_id": "c1", "email": "ann@example.org"})
            assert client["private_check"].contacts.find_one({"_id": "c1"})["email"] == "ann@example.org"
        store_files = [p for p in (data_dir / "store").rglob("*") if p.is_file()]
        assert len(store_files) >= 2  # the database written above, and the one left behind
        assert {p.name: mode(p) for p in store_files} == {p.name: 0o600 for p in store_files}
        assert mode(data_dir) == mode(data_dir / "store") == 0o700
        assert mode(data_dir / "store.log") == mode(data_dir / "store.json") == 0o600
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_chosen_ports_are_free_and_never_ones_an_outgoing_connection_could_be_given():
    # A node restarted on the port chosen for it (a test's private RabbitMQ, the store
    # recorded in store.json) must find it free; the kernel hands ports of its ephemeral
    # range to outgoing connections, so we choose outside it.
    low, high = embedded_store._ephemeral_range()
    ports = {embedded_store.free_port() for _ in range(50)}
    assert all(not low <= port <= high for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # nothing holds it


def _listening_tcp_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def _reads_as(uid: int, url: str) -> bool:
    """Whether a plain PyMongo client, in a process running as `uid`, can read the store."""
    child = os.fork()
    if child == 0:  # the child: become that user, try, and say by the exit code
        try:
            os.setgid(uid)
            os.setuid(uid)
            with MongoClient(url, serverSelectionTimeoutMS=2000, connectTimeoutMS=2000) as client:
                client["postroom"].api_keys.find_one()
            os._exit(0)
        except PyMongoError:
            os._exit(1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.WEXITSTATUS(status) in (0, 1), "the child failed otherwise than by the store's refusal"
    return os.WEXITSTATUS(status) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another user")
def test_only_its_own_user_reaches_the_store_and_it_listens_on_no_tcp_port():
    # not under pytest's tmp_path: its parents are owner-only, which alone would keep
    # another user out; here only the data dir's own mode and the store stand in the way
    base = Path(tempfile.mkdtemp(prefix="postroom-socket-"))
    base.chmod(0o755)
    data_dir = base / "var"
    process, url = embedded_store.start(data_dir)
    try:
        assert url == embedded_store.socket_url(data_dir) and url.endswith("store.sock")
        with MongoClient(url) as client:
            client["postroom"].api_keys.insert_one({"_id": "k1", "workspace_id": "w1"})
        assert _reads_as(os.geteuid(), url)
        assert not _reads_as(NOBODY_UID, url)
        assert not _socket_inodes(process.pid) & _listening_tcp_inodes()
        # Even with the directory and the socket opened up to everyone, the store itself
        # turns another user away (it checks each connection's peer).
        data_dir.chmod(0o755)
        (data_dir / "store.sock").chmod(0o777)
        assert not _reads_as(NOBODY_UID, url)
        assert mode(data_dir / "store.sock") == 0o777  # the refusal above was the store's own
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


def test_commands_started_at_once_on_a_fresh_data_dir_share_one_store(tmp_path):
    data_dir = tmp_path / "var"
    script = ("import sys; from pathlib import Path; from ops import embedded_store; "
              "print(embedded_store.ensure_running(Path(sys.argv[1])))")
    racers = [subprocess.Popen([sys.executable, "-c", script, str(data_dir)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
              for _ in range(4)]
    results = [(r.wait(timeout=120), r.stdout.read().strip(), r.stderr.read()) for r in racers]
    assert all(code == 0 for code, _, _ in results), results
    assert {url for _, url, _ in results} == {embedded_store.socket_url(data_dir)}
    stores = [pid for pid in os.listdir("/proc") if pid.isdigit() and _is_store_of(int(pid), data_dir)]
    try:
        assert len(stores) == 1, stores
        assert "already running" not in (data_dir / "store.log").read_text()
    finally:
        assert embedded_store.stop_recorded(data_dir)


def _is_store_of(pid: int, data_dir: Path) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"ops.store_process" in command and str(data_dir.resolve() / "store").encode() in command
