"""What bench/send and bench/campaign share: a whole Postroom on this machine (embedded
store, RabbitMQ vhost, front, workers) delivering into a fast counting SMTP sink, the bare
aiosmtplib baseline over the same sink, CPU accounting per process group, and teardown."""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import os
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from bench.newsletter import OURS as TEMPLATE_HTML
from bench.newsletter import contacts as render_rows
from ops import embedded_store
from tests.support import services

# bench/render's ~20 KB newsletter (12 merge tags, one {{#if}}, a 5-item {{#each}}), stored
# once as a template; each recipient brings its own template_data.
TEMPLATE_SUBJECT = "Your order {{order_id}}, {{firstName|there}}"
PIPELINE_FIELDS = {"email", "unsubscribe_url", "preferences_url", "company_name", "company_address",
                   "current_month", "current_year"}  # filled by the pipeline, not the caller


def pipeline_parser(prog: str) -> argparse.ArgumentParser:
    """A bench's arguments, starting with the worker pool it starts: --processes, --threads
    and --connections (SMTP, per worker process)."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--connections", type=int, default=4, help="SMTP connections per worker process")
    return parser


def recipients(count: int) -> list[tuple[str, dict]]:
    """(address, template_data) for each recipient."""
    return [(row["email"], {k: v for k, v in row.items() if k not in PIPELINE_FIELDS}) for row in render_rows(count)]


# --- the sink: a separate process so it never shares a GIL with what it measures --------

class _Sink(asyncio.Protocol):
    """Just enough SMTP for aiosmtplib and our transport: 250 to every command, 354 to
    DATA, and each message counted with its bytes. The end of DATA is found by searching
    the buffer, not line by line like aiosmtpd, which spent more CPU per 35 KB message than
    the bare client did. It offers PIPELINING (RFC 2920) and CHUNKING (RFC 3030), as
    Postfix, Exim, Exchange and the large mailbox providers do: the answers to what one
    read brought are written together, and a `BDAT <size> [LAST]` chunk is taken by its
    size. With a `log` (a file opened unbuffered), each message's recipients are written to
    it, one a line, before the message is counted: a count read implies its lines."""

    EHLO = b"250-sink\r\n250-PIPELINING\r\n250-CHUNKING\r\n250 8BITMIME\r\n"

    def __init__(self, counter, size, log=None):
        self.counter, self.size, self.buf, self.in_data, self.scanned = counter, size, bytearray(), False, 0
        self.log, self.rcpts = log, []  # the current message's RCPT TO addresses, when logged
        self.chunk_left, self.chunk_last, self.chunked = 0, False, 0  # a BDAT chunk being read

    def connection_made(self, transport):
        self.transport = transport
        transport.write(b"220 sink ESMTP\r\n")

    def _count(self, size: int) -> None:
        if self.log:
            self.log.write(b"".join(address + b"\n" for address in self.rcpts))
            self.rcpts = []
        with self.counter.get_lock():
            self.size.value += size  # first, so a count read implies its bytes
            self.counter.value += 1

    def _chunk_done(self) -> bytes:
        if self.chunk_last:
            self._count(self.chunked)
            self.chunked = 0
        return b"250 2.0.0 ok\r\n"

    def data_received(self, data: bytes) -> None:
        self.buf += data
        answers = []
        while True:
            if self.chunk_left:
                taken = min(self.chunk_left, len(self.buf))
                del self.buf[:taken]
                self.chunk_left -= taken
                self.chunked += taken
                if self.chunk_left:
                    break
                answers.append(self._chunk_done())
                continue
            if self.in_data:
                end = self.buf.find(b"\r\n.\r\n", self.scanned)
                if end < 0:
                    self.scanned = max(0, len(self.buf) - 4)
                    break
                self._count(end + 2)
                del self.buf[:end + 5]
                self.in_data, self.scanned = False, 0
                answers.append(b"250 2.0.0 ok\r\n")
                continue
            end = self.buf.find(b"\r\n")
            if end < 0:
                break
            line = bytes(self.buf[:end])
            verb = line[:4].upper()
            del self.buf[:end + 2]
            if verb == b"QUIT":
                self.transport.write(b"".join(answers) + b"221 bye\r\n")
                self.transport.close()
                return
            if self.log and verb == b"RCPT":
                self.rcpts.append(line[line.find(b"<") + 1:line.rfind(b">")])
            if verb == b"BDAT":
                words = line.split()
                self.chunk_left, self.chunk_last = int(words[1]), words[-1].upper() == b"LAST"
                if not self.chunk_left:  # an empty chunk (e.g. `BDAT 0 LAST`): done at once
                    answers.append(self._chunk_done())
                continue
            self.in_data = verb == b"DATA"
            answers.append({b"DATA": b"354 go on\r\n", b"EHLO": self.EHLO}.get(verb, b"250 ok\r\n"))
        if answers:
            self.transport.write(b"".join(answers))


def _sink_main(port: int, counter, size, ready, recipients_log: Path | None) -> None:
    log = open(recipients_log, "ab", buffering=0) if recipients_log else None

    async def serve():
        server = await asyncio.get_running_loop().create_server(lambda: _Sink(counter, size, log), "127.0.0.1", port)
        ready.set()
        await server.serve_forever()
    asyncio.run(serve())


def start_sink(recipients_log: Path | None = None) -> tuple[multiprocessing.Process, int, object, object]:
    """The sink counts messages and their bytes (`counter` guards both); with
    `recipients_log`, it also writes every message's recipients there, one a line."""
    port = embedded_store.free_port()
    counter, size = multiprocessing.Value("q", 0), multiprocessing.Value("q", 0, lock=False)
    ready = multiprocessing.Event()
    process = multiprocessing.Process(target=_sink_main, args=(port, counter, size, ready, recipients_log),
                                      daemon=True)
    process.start()
    ready.wait(30)
    return process, port, counter, size


def wait_count(counter, target: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while counter.value < target:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {counter.value} of {target} messages arrived in {timeout}s")
        time.sleep(0.02)
    return time.monotonic()


# --- the baseline: bare aiosmtplib, prebuilt messages, N connections ---------------------

def prebuilt(count: int) -> list[tuple[str, list[str], bytes]]:
    """The pipeline's messages, built ahead: the same template and template_data rendered
    by the same code (pipelines.templates.personalise, pipelines.messages.mime), so the same size."""
    from pipelines.core.clock import utcnow
    from pipelines.messages.mime import compose
    from pipelines.templates.personalise import compile_content, recipient_data, render_content, system_fields
    content, out = compile_content(TEMPLATE_SUBJECT, TEMPLATE_HTML, None), []
    for i, (to, template_data) in enumerate(recipients(count)):
        system = system_fields(workspace={"_id": "bench"}, contact_id=None, email=to, message_id=f"b{i}",
                               base_url="http://127.0.0.1:8000", secret_key="k" * 32, now=utcnow())
        subject, html, _ = render_content(content, recipient_data(contact=None, email=to,
                                                                  template_data=template_data, system=system))
        out.append((f"bounce+b{i}@bounces.postroom.test", [to],
                    compose(message_id=f"b{i}", from_address="acme@postroom.test", from_name="Acme", to=[to],
                            subject=subject, reply_to=None, text=None, html=html, id_domain="postroom.test")))
    return out


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
        try:   # every thread's children: the render pool is started from the event-loop thread
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(child) for child in (task / "children").read_text().split())
        except OSError:
            pass
    return out


def broker_pids() -> list[int]:
    """RabbitMQ's Erlang VM (beam.smp), shared with every other vhost on the box: its CPU
    during a run is the broker's share of the cores the pipeline competes for."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "beam.smp":
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def cpu_of(pids: dict[str, list[int]]) -> dict[str, float]:
    return {name: sum(cpu_seconds(p) for p in ps) for name, ps in pids.items()}


def print_cpu(label: str, used: dict[str, float], wall: float) -> None:
    print(f"CPU seconds during {label}: " +
          ", ".join(f"{name} {sec:.1f}s ({sec / wall:.0%} of wall)" for name, sec in used.items()))


# --- the stack ----------------------------------------------------------------------------------

def make_tenant(url: str, database: str) -> str:
    from mongo import api_keys, workspaces
    from mongo.client import connect
    from pipelines.messages.sender import workspace_local_part

    async def go():
        client, db = connect(url, database)
        ws = await workspaces.create(db, "Bench", from_email="hello@acme.example")
        await workspaces.update_settings(db, ws["_id"],
                                         {"sending_local_part": workspace_local_part("Bench", ws["_id"])})
        key, _ = await api_keys.create(db, ws["_id"], name="bench", sandbox=False, permissions=["*"],
                                       rate_limit=10_000_000, email_rate_limit=10_000_000)
        await client.close()
        return key
    return asyncio.run(go())


class Stack:
    """The sink, the store, a vhost and the front, started on entry (with a tenant and its
    API client); more processes with `start`; all stopped on exit, newest first."""

    def __init__(self, prefix: str, smtp_connections: int, api_timeout_seconds: float, env: dict | None = None,
                 record_recipients: bool = False):
        self.prefix, self.smtp_connections, self.api_timeout_seconds = prefix, smtp_connections, api_timeout_seconds
        self.record_recipients = record_recipients
        self.extra_env = env or {}
        self.procs: list = []
        self.bare_cpu_ms: list[float] = []  # each baseline run's bare-client CPU per message

    def __enter__(self) -> Stack:
        self.run_dir = Path(tempfile.mkdtemp(prefix=self.prefix))
        self.recipients_log = self.run_dir / "sink-recipients.txt" if self.record_recipients else None
        self.sink, self.sink_port, self.counter, self.sink_bytes = start_sink(self.recipients_log)
        self.store, self.store_url = embedded_store.start(self.run_dir)
        self.vhost, amqp = services.create_vhost()
        self.database = f"bench_{uuid.uuid4().hex[:8]}"
        port = embedded_store.free_port()
        self.env = {**os.environ, "POSTROOM_MONGODB_URL": self.store_url, "POSTROOM_MONGODB_DATABASE": self.database,
                    "POSTROOM_AMQP_URL": amqp, "POSTROOM_SMTP_URL": f"smtp://127.0.0.1:{self.sink_port}",
                    "POSTROOM_BASE_URL": f"http://127.0.0.1:{port}", "POSTROOM_SECRET_KEY": uuid.uuid4().hex,
                    "POSTROOM_DATA_DIR": str(self.run_dir / "data"),
                    "POSTROOM_SMTP_CONNECTIONS": str(self.smtp_connections),
                    "PYTHONPATH": str(Path(__file__).resolve().parents[1]), **self.extra_env}
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

    def recipients_seen(self) -> collections.Counter:
        """How many messages reached the sink for each recipient (`record_recipients`)."""
        lines = self.recipients_log.read_bytes().decode().split("\n")
        return collections.Counter(line for line in lines if line)

    def start(self, name: str, args: list[str]):
        process = services.Process(name, args, self.env, self.run_dir)
        self.procs.append(process)
        return process

    def baseline(self, count: int, connections: int) -> float:
        """Messages per second of the bare client (the sink counts them on top of what it
        counted already)."""
        print(f"baseline: building {count:,} messages …", flush=True)
        messages, pids = prebuilt(count), {"bare client": [os.getpid()], "sink": [self.sink.pid]}
        counted, counted_bytes = self.counter.value, self.sink_bytes.value
        before, start = cpu_of(pids), time.monotonic()
        asyncio.run(bare_client(self.sink_port, messages, connections))
        wall = wait_count(self.counter, counted + count, 600) - start
        print(f"bare aiosmtplib, {connections} connections: {count / wall:,.0f} msg/s "
              f"(mean message {(self.sink_bytes.value - counted_bytes) / count / 1024:.1f} KB)", flush=True)
        used = {name: sec - before[name] for name, sec in cpu_of(pids).items()}
        print_cpu("the baseline", used, wall)
        # the bare client's CPU per message: this box's speed at the time, for comparing
        # CPU costs measured minutes apart on a box whose speed drifts
        self.bare_cpu_ms.append(used["bare client"] / count * 1000)
        return count / wall

    def groups(self, **workers) -> dict[str, list[int]]:
        """Process groups for CPU accounting: the store, the front, the sink and `workers`."""
        return {"store": [self.store.pid], "front": tree(self.front.proc.pid), "sink": [self.sink.pid],
                **{name: tree(process.proc.pid) for name, process in workers.items()}}

    def __exit__(self, *_exc_info) -> None:
        for p in reversed(self.procs):
            p.stop()
        self.store.terminate()
        self.store.wait(timeout=10)
        services.delete_vhost(self.vhost)
        self.sink.terminate()
