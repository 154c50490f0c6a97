"""Services a test owns so it can break them: a store process it may kill and restart, a
RabbitMQ node of its own (the shared broker on 5672 is never touched), and a TCP proxy in
front of the store that can lose the answer to a write the store did apply."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

import bson

from ops import embedded_store


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class PrivateStore:
    """An embedded store process of the test's own, on a fixed port and data dir, so it can
    be killed (-9) and started again where clients expect it."""

    def __init__(self, base_dir: Path):
        self.data_dir = base_dir
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = embedded_store.free_port()
        self.url = f"mongodb://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> PrivateStore:
        self.process, _ = embedded_store.start(self.data_dir, self.port)
        return self

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def _rabbitmq_server() -> str:
    # The packaged /usr/sbin wrapper switches to the rabbitmq user and its home; the
    # script behind it runs the node as whoever calls it, with the environment given.
    packaged = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
    found = str(packaged) if packaged.exists() else shutil.which("rabbitmq-server")
    if not found:
        raise RuntimeError("rabbitmq-server is not installed (apt-get install rabbitmq-server); "
                           "the broker fault tests start a private node with it.")
    return found


class PrivateRabbitmq:
    """A RabbitMQ node of the test's own: its own node name, AMQP and distribution ports,
    data and log directories, configuration and (no) plugins. Stopped and started again
    with the same data, it keeps its durable queues and persistent messages."""

    # A node boots in ~5 s on an idle box; a loaded 2-core box (a whole suite beside it)
    # was seen to need more than a minute.
    START_TIMEOUT_SECONDS = 150

    def __init__(self, base_dir: Path):
        self.base_dir = base_dir
        base_dir.mkdir(parents=True, exist_ok=True)
        self.port = embedded_store.free_port()
        self.dist_port = embedded_store.free_port()
        self.node = f"postroom-test-{uuid.uuid4().hex[:8]}@localhost"
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"
        (base_dir / "rabbitmq.conf").write_text(f"listeners.tcp.default = 127.0.0.1:{self.port}\n")
        (base_dir / "enabled_plugins").write_text("[].\n")
        (base_dir / "rabbitmq-env.conf").write_text("")  # not the machine's, which names the shared node
        self.env = {**os.environ,
                    "RABBITMQ_NODENAME": self.node,
                    "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                    "RABBITMQ_NODE_PORT": str(self.port),
                    "RABBITMQ_DIST_PORT": str(self.dist_port),
                    "RABBITMQ_MNESIA_BASE": str(base_dir / "mnesia"),
                    "RABBITMQ_LOG_BASE": str(base_dir / "log"),
                    "RABBITMQ_CONFIG_FILE": str(base_dir / "rabbitmq.conf"),
                    "RABBITMQ_ENABLED_PLUGINS_FILE": str(base_dir / "enabled_plugins"),
                    "RABBITMQ_CONF_ENV_FILE": str(base_dir / "rabbitmq-env.conf"),
                    "ERL_EPMD_ADDRESS": "127.0.0.1"}
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> PrivateRabbitmq:
        self.starts += 1
        log = open(self.base_dir / f"node-{self.starts}.log", "wb")
        self.process = subprocess.Popen([_rabbitmq_server()], env=self.env, cwd=self.base_dir, stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        deadline = time.monotonic() + self.START_TIMEOUT_SECONDS
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                tail = (self.base_dir / f"node-{self.starts}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the private RabbitMQ node did not start; its log ends:\n{tail}")
            time.sleep(0.3)
        return self

    def _answers(self) -> bool:
        import pika
        if not _port_open(self.port):
            return False
        try:
            pika.BlockingConnection(pika.URLParameters(self.url)).close()
            return True
        except Exception:  # still booting
            return False

    def stop(self) -> None:
        """As an operator's `systemctl stop`: the node shuts down cleanly."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)  # the start script stops the node
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        while _port_open(self.port):
            time.sleep(0.1)

    def kill(self) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()

    def close(self) -> None:
        self.stop()
        self.kill()


_HEADER = struct.Struct("<iiii")  # messageLength, requestID, responseTo, opCode
OP_MSG = 2013


def _command_of(body: bytes, opcode: int) -> dict | None:
    """The command document of an OP_MSG (its kind-0 section), else None."""
    if opcode != OP_MSG or len(body) < 5 or body[4] != 0:
        return None
    size = struct.unpack_from("<i", body, 5)[0]
    return bson.decode(body[5:5 + size])


class StoreProxy:
    """A TCP proxy in front of the store. `lose_next_reply(collection)`: the next insert into
    that collection reaches the store, which applies it, and its answer is thrown away with
    the connection, as when a network or a store dies at the wrong moment. `refuse()` cuts
    every connection and refuses new ones until `heal()`."""

    def __init__(self, store_url: str):
        # the store's address: its Unix socket (the embedded store's) or a loopback TCP port
        target = store_url.removeprefix("mongodb://").split("/")[0].split("?")[0]
        self.target = urllib.parse.unquote(target) if target.endswith(".sock") else int(target.rsplit(":", 1)[1])
        self.port = embedded_store.free_port()
        self.url = f"mongodb://127.0.0.1:{self.port}"
        self._lose_insert_into: str | None = None
        self._refuse_after_loss = False
        self.refusing = False
        self.lost_replies = 0
        self._writers: set = set()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", self.port), self.loop).result(10)

    def lose_next_reply(self, collection: str, *, then_refuse: bool = False) -> None:
        self._lose_insert_into = collection
        self._refuse_after_loss = then_refuse

    def refuse(self) -> None:
        self.loop.call_soon_threadsafe(self._refuse)

    def heal(self) -> None:
        self.refusing = False

    def _refuse(self) -> None:
        self.refusing = True
        for writer in list(self._writers):
            writer.close()

    async def _serve(self, client_reader, client_writer) -> None:
        if self.refusing:
            client_writer.close()
            return
        try:
            if isinstance(self.target, str):
                server_reader, server_writer = await asyncio.open_unix_connection(self.target)
            else:
                server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            client_writer.close()
            return
        self._writers.update({client_writer, server_writer})
        doomed: set[int] = set()  # request ids whose answers are to be lost
        pumps = [asyncio.ensure_future(self._upstream(client_reader, server_writer, doomed)),
                 asyncio.ensure_future(self._downstream(server_reader, client_writer, server_writer, doomed))]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)  # either side closing ends both
            for writer in (client_writer, server_writer):
                self._writers.discard(writer)
                writer.close()

    async def _upstream(self, reader, writer, doomed: set[int]) -> None:
        while True:
            header = await reader.readexactly(_HEADER.size)
            length, request_id, _, opcode = _HEADER.unpack(header)
            body = await reader.readexactly(length - _HEADER.size)
            command = _command_of(body, opcode)
            if self._lose_insert_into and command and command.get("insert") == self._lose_insert_into:
                self._lose_insert_into = None
                doomed.add(request_id)
            writer.write(header + body)
            await writer.drain()

    async def _downstream(self, reader, client_writer, server_writer, doomed: set[int]) -> None:
        while True:
            header = await reader.readexactly(_HEADER.size)
            length, _, response_to, _ = _HEADER.unpack(header)
            body = await reader.readexactly(length - _HEADER.size)
            if response_to in doomed:  # the store applied the write; its client never hears
                self.lost_replies += 1
                if self._refuse_after_loss:
                    self._refuse()
                client_writer.close()
                server_writer.close()
                return
            client_writer.write(header + body)
            await client_writer.drain()

    def close(self) -> None:
        async def shut():
            self._refuse()
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
