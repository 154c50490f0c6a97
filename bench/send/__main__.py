"""bench/send: 20,000 personalised transactional sends through the whole pipeline
(front → RabbitMQ → render → send) into a fast local SMTP sink, beside a bare aiosmtplib
client sending the same kind of prebuilt messages over the same number of connections
to the same sink, in the same run.

    .venv/bin/python -m bench.send [--messages 20000] [--processes 2] [--threads 8]

Starts its own embedded store, RabbitMQ vhost, front and worker processes. Prints both
rates, their ratio, and each process's CPU seconds during the pipeline run (the store's
share tells whether the store bounds it)."""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from ops import embedded_store
from tests.support import services

BATCH_SIZE = 1000
HTML = ("<html><body><h1>Hello {{first_name}}</h1>"
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

def prebuilt(count: int) -> list[tuple[str, list[str], bytes]]:
    from pipelines.mime import compose
    return [(f"bounce+b{i}@bounces.postroom.test", [f"user{i}@example.org"],
             compose(message_id=f"b{i}", from_address="acme@postroom.test", from_name="Acme",
                     to=[f"user{i}@example.org"], subject="Your order", reply_to=None, text=None,
                     html=HTML.replace("{{first_name}}", f"User {i}").format(n=i, name=f"User {i}"),
                     id_domain="postroom.test"))
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


# --- the pipeline ---------------------------------------------------------------------------

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


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.send")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--connections", type=int, default=4, help="SMTP connections per worker process")
    args = parser.parse_args()
    total = args.messages
    connections = args.connections * args.processes

    run_dir = Path(tempfile.mkdtemp(prefix="postroom-bench-"))
    sink, sink_port, counter = start_sink()
    store, store_url = embedded_store.start(run_dir)
    vhost, amqp = services.create_vhost()
    database = f"bench_{uuid.uuid4().hex[:8]}"
    port = embedded_store.free_port()
    env = dict(os.environ)
    env.update({"POSTROOM_MONGODB_URL": store_url, "POSTROOM_MONGODB_DATABASE": database,
                "POSTROOM_AMQP_URL": amqp, "POSTROOM_SMTP_URL": f"smtp://127.0.0.1:{sink_port}",
                "POSTROOM_BASE_URL": f"http://127.0.0.1:{port}", "POSTROOM_SECRET_KEY": uuid.uuid4().hex,
                "POSTROOM_DATA_DIR": str(run_dir / "data"), "POSTROOM_SMTP_CONNECTIONS": str(args.connections),
                "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    procs = []
    try:
        front = services.Process("front", ["front", "--port", str(port)], env, run_dir)
        procs.append(front)
        services.wait_healthy(f"http://127.0.0.1:{port}", front)
        worker = services.Process("worker", ["worker", "--queues", "render,send", "-p", str(args.processes),
                                             "-t", str(args.threads)], env, run_dir)
        procs.append(worker)
        key = make_tenant(store_url, database)
        time.sleep(3)  # workers connect and start consuming

        print(f"baseline: building {total} messages …", flush=True)
        messages = prebuilt(total)
        start = time.monotonic()
        asyncio.run(bare_client(sink_port, messages, connections))
        end = wait_count(counter, total, 600)
        bare_rate = total / (end - start)
        print(f"bare aiosmtplib, {connections} connections: {bare_rate:,.0f} msg/s", flush=True)

        pids = {"store": [store.pid], "front": tree(front.proc.pid), "workers": tree(worker.proc.pid)}
        before = {name: sum(cpu_seconds(p) for p in ps) for name, ps in pids.items()}
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1",
                              headers={"Authorization": f"Bearer {key}"}, timeout=120)
        start = time.monotonic()
        for first in range(0, total, BATCH_SIZE):
            items = [{"to": f"user{i}@example.org", "subject": "Your order", "from_name": "Acme",
                      "html": HTML.replace("{{first_name}}", f"User {i}").format(n=i, name=f"User {i}")}
                     for i in range(first, min(total, first + BATCH_SIZE))]
            response = client.post("/email/batch", json={"messages": items})
            response.raise_for_status()
        accepted = time.monotonic()
        end = wait_count(counter, 2 * total, 1800)
        wall = end - start
        used = {name: sum(cpu_seconds(p) for p in pids[name]) - before[name] for name in pids}
        rate = total / wall
        print(f"API accepted {total} in {accepted - start:.1f}s")
        print(f"pipeline (front → RabbitMQ → render → send), {args.processes} worker processes: "
              f"{rate:,.0f} msg/s ({wall:.1f}s)")
        print(f"ratio pipeline / bare client: {rate / bare_rate:.2f}")
        print("CPU seconds during the pipeline run: " +
              ", ".join(f"{name} {sec:.1f}s ({sec / wall:.0%} of wall)" for name, sec in used.items()))
        return 0
    finally:
        for p in reversed(procs):
            p.stop()
        store.terminate()
        store.wait(timeout=10)
        services.delete_vhost(vhost)
        sink.terminate()


if __name__ == "__main__":
    sys.exit(main())
