"""Webhook delivery rate: Postroom's lanes against a bare httpx client, same run.

    python -m bench.webhooks [--deliveries 10000] [--subscriptions 4] [--concurrency 8]
                             [--processes 1] [--threads 8]

Both post the same signed payloads (API spec §6 headers, HMAC over the exact body) into
one fast local HTTP/1.1 receiver (keep-alive; a separate process, so it never shares a
GIL with what it measures), over the same number of connections: `subscriptions ×
concurrency` (the bare client keeps that many requests in flight on one pooled
AsyncClient; Postroom's turns send up to `concurrency` at once per subscription over the
worker loop's kept-alive connections).

Postroom's run is the whole path after dispatch: the deliveries are written into the
store (as the scheduler's dispatch writes them) before the worker pool starts, then the
scheduler gives each subscription's lane a turn and the workers lease, sign, send, record
every attempt and finish each delivery. The rate is taken between the receiver's first
and last request. Printed: both rates, the ratio (ours / bare) and each process's CPU."""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import time
import uuid

import httpx

from bench.stack import Stack, broker_pids, cpu_of, cpu_seconds, print_cpu, tree
from ops import embedded_store

EVENT = "contact.created"


# --- the receiver: minimal HTTP/1.1 with keep-alive ---------------------------------------

class _Receiver(asyncio.Protocol):
    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"

    def __init__(self, counter, first, last):
        self.counter, self.first, self.last, self.buf = counter, first, last, bytearray()

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        answers = 0
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                break
            length = 0
            for line in bytes(self.buf[:end]).split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if len(self.buf) < end + 4 + length:
                break
            del self.buf[:end + 4 + length]
            answers += 1
        if answers:
            now = time.time()
            with self.counter.get_lock():
                if self.counter.value == 0:
                    self.first.value = now
                self.counter.value += answers
                self.last.value = now
            self.transport.write(self.ANSWER * answers)


def _receiver_main(port: int, counter, first, last, ready) -> None:
    async def serve():
        server = await asyncio.get_running_loop().create_server(
            lambda: _Receiver(counter, first, last), "127.0.0.1", port, backlog=1024)
        ready.set()
        await server.serve_forever()
    asyncio.run(serve())


class Receiver:
    def __init__(self):
        self.port = embedded_store.free_port()
        self.counter = multiprocessing.Value("q", 0)
        self.first = multiprocessing.Value("d", 0.0, lock=False)
        self.last = multiprocessing.Value("d", 0.0, lock=False)
        ready = multiprocessing.Event()
        self.process = multiprocessing.Process(target=_receiver_main, daemon=True,
                                               args=(self.port, self.counter, self.first, self.last, ready))
        self.process.start()
        ready.wait(30)

    def reset(self) -> None:
        with self.counter.get_lock():
            self.counter.value = 0

    def wait(self, count: int, timeout: float) -> float:
        """Requests per second between the first and the last of `count` requests."""
        deadline = time.monotonic() + timeout
        while self.counter.value < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.counter.value} of {count} requests arrived in {timeout:.0f} s")
            time.sleep(0.02)
        return (count - 1) / max(1e-6, self.last.value - self.first.value)


# --- the bare client -------------------------------------------------------------------------

async def _bare(url: str, jobs: list[tuple[str, str, str, str]], connections: int) -> None:
    """POST every job `(secret, webhook id, delivery id, body)` signed, `connections` in flight."""
    from pipelines.webhooks import signing as webhook_signing
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(limits=limits, timeout=30, trust_env=False) as client:
        todo = iter(jobs)

        async def worker():
            for secret, webhook_id, delivery_id, body in todo:
                raw = body.encode()
                headers = webhook_signing.delivery_headers(secret=secret, body=raw, timestamp=int(time.time()),
                                                           event=EVENT, delivery_id=delivery_id, webhook_id=webhook_id)
                response = await client.post(url, content=raw, headers=headers)
                await response.aread()
        await asyncio.gather(*(worker() for _ in range(connections)))


# --- Postroom's run --------------------------------------------------------------------------

def _deliveries(hooks: list[dict], workspace_id: str, count: int) -> list[dict]:
    from pipelines.core.clock import now_iso
    from pipelines.webhooks.events import plan_deliveries
    now = now_iso()
    subscriptions = [{"_id": h["id"], "workspace_id": workspace_id, "events": [EVENT], "active": True,
                      "created_at": now} for h in hooks]
    out = []
    for n in range(count):
        event = {"_id": f"bench-{uuid.uuid4().hex}", "workspace_id": workspace_id, "event": EVENT, "timestamp": now,
                 "data": {"contact": {"id": f"c-{n}", "email": f"reader{n}@example.org", "first_name": "Reader"}}}
        out.extend(plan_deliveries(event, [subscriptions[n % len(subscriptions)]], now))
    return out


def _store(stack: Stack, deliveries: list[dict]) -> None:
    from mongo import webhooks as webhook_store
    from mongo.client import connect

    async def go():
        client, db = connect(stack.store_url, stack.database)
        for start in range(0, len(deliveries), 2000):
            await webhook_store.insert_deliveries(db, deliveries[start:start + 2000])
        await client.close()
    asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.webhooks")
    parser.add_argument("--deliveries", type=int, default=10_000)
    parser.add_argument("--subscriptions", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8, help="per subscription (endpoint)")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    connections = args.subscriptions * args.concurrency
    receiver = Receiver()
    env = {"POSTROOM_ALLOW_PRIVATE_TARGETS": "1", "POSTROOM_SCHEDULER_INTERVAL_SECONDS": "0.2",
           "POSTROOM_WEBHOOK_ENDPOINT_CONCURRENCY": str(args.concurrency)}
    with Stack("postroom-bench-webhooks-", smtp_connections=1, api_timeout_seconds=60, env=env) as stack:
        hooks = []
        for n in range(args.subscriptions):
            response = stack.api.post("/webhooks/triggers", json={
                "targetUrl": f"http://127.0.0.1:{receiver.port}/hook/{n}", "event": EVENT})
            response.raise_for_status()
            hooks.append(response.json()["data"])
        workspace = asyncio.run(_workspace(stack))
        deliveries = _deliveries(hooks, workspace, args.deliveries)
        secrets = {h["id"]: h["secret"] for h in hooks}
        print(f"{args.deliveries:,} deliveries to {args.subscriptions} subscriptions, {connections} connections "
              f"({args.subscriptions} × {args.concurrency}); workers {args.processes} × {args.threads} threads",
              flush=True)

        # the bare client: the same bodies, signed, over the same number of connections
        jobs = [(secrets[d["webhook_id"]], d["webhook_id"], d["_id"], d["body"]) for d in deliveries]
        bench_pid = os.getpid()
        pids = {"bare client": [bench_pid], "receiver": [receiver.process.pid]}
        before = cpu_of(pids)
        from actors.event_loop import run
        run(_bare(f"http://127.0.0.1:{receiver.port}/hook/bare", jobs, connections))
        bare = receiver.wait(len(jobs), 60)
        wall = receiver.last.value - receiver.first.value
        print(f"bare httpx, {connections} connections: {bare:,.0f} deliveries/s", flush=True)
        print_cpu("the bare client", {k: v - before[k] for k, v in cpu_of(pids).items()}, wall)

        # Postroom: stored first, then the scheduler and the worker pool deliver them
        receiver.reset()
        started = time.monotonic()
        _store(stack, deliveries)
        print(f"stored {len(deliveries):,} deliveries in {time.monotonic() - started:.1f} s", flush=True)
        scheduler = stack.start("scheduler", ["scheduler"])
        worker = stack.start("worker", ["worker", "--queues", "webhooks", "-p", str(args.processes),
                                        "-t", str(args.threads)])
        def groups() -> dict[str, list[int]]:  # read again at the end: the pool forks its workers later
            found = {**stack.groups(), "scheduler": tree(scheduler.proc.pid), "worker": tree(worker.proc.pid),
                     "broker": broker_pids(), "receiver": [receiver.process.pid]}
            found.pop("sink", None)
            return found
        before = {pid: cpu_seconds(pid) for pids in groups().values() for pid in pids}
        ours = receiver.wait(len(deliveries), 900)
        wall = receiver.last.value - receiver.first.value
        used = {name: sum(cpu_seconds(pid) - before.get(pid, 0.0) for pid in pids)
                for name, pids in groups().items()}
        print(f"postroom, {connections} connections: {ours:,.0f} deliveries/s", flush=True)
        print_cpu("postroom (from the worker pool's start, its start-up included)", used, wall)
        print(f"ratio (postroom / bare httpx): {ours / bare:.2f}", flush=True)


async def _workspace(stack: Stack) -> str:
    from mongo.client import connect
    client, db = connect(stack.store_url, stack.database)
    try:
        return (await db.api_keys.find_one({}))["workspace_id"]
    finally:
        await client.close()


if __name__ == "__main__":
    main()
