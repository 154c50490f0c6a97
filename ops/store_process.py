"""Runs nx-27017 with its per-command INFO logging switched off (it logs every command,
twice, which costs throughput and fills the disk); warnings and errors still go to the log.
Its files (one SQLite database per database, with journals) are created owner-only.

It serves each connection on a thread of its own (`--threaded`) rather than from one
event loop that hands every command to a thread pool: a command then costs no hand-over
between threads. bench.api measured the store's CPU a single send at 0.26–0.30 ms this way
against 0.36–0.39 ms the other (paired runs, the same minutes); the commands and their
locking (one lock per database) are the same in both.

`--socket PATH`: served on that Unix socket instead of a TCP port, to processes of this
user only. nx-27017 has no authentication and listens on TCP alone, where any user of
the machine could read every workspace; a socket in the owner-only data directory is
reachable by its owner only, and each connection's peer is checked besides (SO_PEERCRED:
the same user, so not even root gets in through a loosened directory)."""

import errno
import logging
import os
import socket
import struct
import sys
import threading

from nx_27017 import daemon, server
from nx_27017.nx_27017 import main
from nx_27017.wire_protocol import SOCKET_BACKLOG

log = logging.getLogger("nx_27017")

_PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


def _clear_stale(path: str) -> None:
    """Remove a socket file a killed store left behind; refuse to start beside a live one."""
    probe = socket.socket(socket.AF_UNIX)
    try:
        probe.connect(path)
    except FileNotFoundError:
        return
    except OSError as error:
        if error.errno != errno.ECONNREFUSED:
            raise
        os.unlink(path)
        return
    finally:
        probe.close()
    raise SystemExit(f"a store already answers on {path}")


def _same_user(connection: socket.socket) -> bool:
    _, uid, _ = _PEER_CREDENTIALS.unpack(
        connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER_CREDENTIALS.size))
    return uid == os.geteuid()


def serve_unix_socket(path: str):
    """A stand-in for nx-27017's TCP accept loop: the same per-connection threads, on a
    Unix socket, for peers of this user only."""
    def run(host, port, handler, use_threading=True):
        _clear_stale(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(SOCKET_BACKLOG)
        log.warning("listening on %s (owner only)", path)
        try:
            while True:
                connection, _ = listener.accept()
                if not _same_user(connection):
                    log.warning("refused a connection from another user")
                    connection.close()
                    continue
                threading.Thread(target=server.handle_client_threaded, args=(connection, handler),
                                 daemon=True).start()
        finally:
            listener.close()
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    return run


def _take_option(name: str) -> str | None:
    if name not in sys.argv:
        return None
    at = sys.argv.index(name)
    value = sys.argv[at + 1]
    del sys.argv[at:at + 2]
    return value


if __name__ == "__main__":
    os.umask(0o077)
    logging.disable(logging.INFO)
    sys.argv[0] = "nx-27017"
    if "--threaded" not in sys.argv:
        sys.argv.append("--threaded")
    unix_socket = _take_option("--socket")
    if unix_socket is not None:
        daemon.run_server_threaded = serve_unix_socket(unix_socket)  # nx-27017 calls it by this name
    main()
