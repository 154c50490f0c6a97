"""What bench/send and bench/campaign share: a whole Postroom on this machine (embedded
store, RabbitMQ vhost, front, workers) delivering into a fast counting SMTP sink, the bare
aiosmtplib baseline over the same sink, CPU accounting per process group, and teardown."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from ops import embedded_store
from tests.support import services

BASELINE_HTML = ("<html><body><h1>Hello {{first_name}}</h1>"
                 + "<p>Your order #{n} has shipped. Thanks for shopping with us, {name}.</p>" * 20
                 + "</body></html>")


# --- the sink: a separate process so it never shares a GIL with what it measures --------

def _sink_main(port: int, counter, ready) -> None:
    from aiosmtpd.controller import Controller

    class Counting:
        async def handle_DATA(self, server, session, envelope):
            with counter.get_lock():
                counter.value += 1
            return "250 2.0.0 ok"

    controller = Controller(Counting(), hostname="127.0.0.1", port=port)
    controller.start()
    ready.set()
    while True:
        time.sleep(3600)


def start_sink() -> tuple[multiprocessing.Process, int, object]:
    port = embedded_store.free_port()
    counter, ready = multiprocessing.Value("q", 0), multiprocessing.Event()
    process = multiprocessing.Process(target=_sink_main, args=(port, counter, ready), daemon=True)
    process.start()
    ready.wait(30)
    return process, port, counter


def wait_count(counter, target: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while counter.value < target:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {counter.value} of {target} messages arrived in {timeout}s")
        time.sleep(0.02)
    return time.monotonic()


# --- the baseline: bare aiosmtplib, prebuilt messages, N connections ---------------------

def baseline_html(i: int) -> str:
    return BASELINE_HTML.replace("{{first_name}}", f"User {i}").format(n=i, name=f"User {i}")


def prebuilt(count: int) -> list[tuple[str, list[str], bytes]]:
    from pipelines.mime import compose
    return [(f"bounce+b{i}@bounces.postroom.test", [f"user{i}@example.org"],
             compose(message_id=f"b{i}", from_address="acme@postroom.test", from_name="Acme",
                     to=[f"user{i}@example.org"], subject="Your order", reply_to=None, text=None,
                     html=baseline_html(i), id_domain="postroom.test"))
            for i in range(count)]


async def bare_client(port: int, messages: list, connections: int) -> None:
    import aiosmtplib
    queue: asyncio.Queue = asyncio.Queue()
    for m in messages:
        queue.put_nowait(m)

    async def lane():
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, start_tls=False)
        await client.connect()
        while not queue.empty():
            mail_from, rcpt, data = queue.get_nowait()
            await client.sendmail(mail_from, rcpt, data)
        await client.quit()
    await asyncio.gather(*(lane() for _ in range(connections)))


# --- CPU accounting ---------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children that were reaped, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for child in Path(f"/proc/{p}/task/{p}/children").read_text().split():
                todo.append(int(child))
        except OSError:
            pass
    return out


def cpu_of(pids: dict[str, list[int]]) -> dict[str, float]:
    return {name: sum(cpu_seconds(p) for p in ps) for name, ps in pids.items()}


def print_cpu(label: str, used: dict[str, float], wall: float) -> None:
    print(f"CPU seconds during {label}: " +
          ", ".join(f"{name} {sec:.1f}s ({sec / wall:.0%} of wall)" for name, sec in used.items()))


# --- the stack ----------------------------------------------------------------------------------

def make_tenant(url: str, database: str) -> str:
    from mongo import api_keys, workspaces
    from mongo.client import connect
    from pipelines.sender import workspace_local_part

    async def go():
        client, db = connect(url, database)
        ws = await workspaces.create(db, "Bench", from_email="hello@acme.example")
        await workspaces.update_settings(db, ws["_id"], {"sending_local_part": workspace_local_part("Bench", ws["_id"])})
        key, _ = await api_keys.create(db, ws["_id"], name="bench", sandbox=False, permissions=["*"],
                                       rate_limit=10_000_000, email_rate_limit=10_000_000)
        await client.close()
        return key
    return asyncio.run(go())


class Stack:
    """The sink, the store, a vhost and the front, started on entry (with a tenant and its
    API client); more processes with `start`; all stopped on exit, newest first."""

    def __init__(self, prefix: str, smtp_connections: int, api_timeout_seconds: float):
        self.prefix, self.smtp_connections, self.api_timeout_seconds = prefix, smtp_connections, api_timeout_seconds
        self.procs: list = []

    def __enter__(self) -> "Stack":
        self.run_dir = Path(tempfile.mkdtemp(prefix=self.prefix))
        self.sink, self.sink_port, self.counter = start_sink()
        self.store, self.store_url = embedded_store.start(self.run_dir)
        self.vhost, amqp = services.create_vhost()
        self.database = f"bench_{uuid.uuid4().hex[:8]}"
        port = embedded_store.free_port()
        self.env = {**os.environ, "POSTROOM_MONGODB_URL": self.store_url, "POSTROOM_MONGODB_DATABASE": self.database,
                    "POSTROOM_AMQP_URL": amqp, "POSTROOM_SMTP_URL": f"smtp://127.0.0.1:{self.sink_port}",
                    "POSTROOM_BASE_URL": f"http://127.0.0.1:{port}", "POSTROOM_SECRET_KEY": uuid.uuid4().hex,
                    "POSTROOM_DATA_DIR": str(self.run_dir / "data"),
                    "POSTROOM_SMTP_CONNECTIONS": str(self.smtp_connections),
                    "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        try:
            self.front = self.start("front", ["front", "--port", str(port)])
            services.wait_healthy(f"http://127.0.0.1:{port}", self.front)
            self.key = make_tenant(self.store_url, self.database)
            self.api = httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1",
                                    headers={"Authorization": f"Bearer {self.key}"}, timeout=self.api_timeout_seconds)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def start(self, name: str, args: list[str]):
        process = services.Process(name, args, self.env, self.run_dir)
        self.procs.append(process)
        return process

    def baseline(self, count: int, connections: int) -> float:
        """Messages per second of the bare client; the sink counts them first."""
        print(f"baseline: building {count:,} messages …", flush=True)
        messages = prebuilt(count)
        start = time.monotonic()
        asyncio.run(bare_client(self.sink_port, messages, connections))
        rate = count / (wait_count(self.counter, count, 600) - start)
        print(f"bare aiosmtplib, {connections} connections: {rate:,.0f} msg/s", flush=True)
        return rate

    def __exit__(self, *exc) -> None:
        for p in reversed(self.procs):
            p.stop()
        self.store.terminate()
        self.store.wait(timeout=10)
        services.delete_vhost(self.vhost)
        self.sink.terminate()
