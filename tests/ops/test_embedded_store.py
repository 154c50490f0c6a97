"""The embedded store keeps its data private: the data directory and the store directory
are 0700 and every file the store writes is 0600, including files an earlier version left
world-readable. The ports it chooses stay free for a restart."""

import socket
import stat

from pymongo import MongoClient

from ops import embedded_store


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
