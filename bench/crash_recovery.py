"""Does the API stay usable while the service recovers from a crash? (Postroom issue #30:
with ~6,000 messages stored, a worker pool killed with SIGKILL and restarted left the API
unusable for ~19 minutes: every message of a redelivered job was claimed with a guard on a
lapsed lease written as a date string, and the embedded store answered each such write by
reading every message under its one lock.)

A whole Postroom (embedded store, RabbitMQ vhost, front, scheduler) with --stored messages
already in the store (sent ones, as the send path leaves them), then a live batch of
--live messages to a fast SMTP sink; the worker pool is killed with SIGKILL mid-send and a
new one started at once. From the kill until every live recipient has had its message at
the sink (or --seconds), `GET /contacts?limit=1` is timed back to back; its p50/p99/max are
printed beside the same request's before any pool started (this run's baseline), with each
process group's CPU over the recovery and the box's load average (a slow API beside an
idle store is a box short of CPU, not a scan); then the live recipients the sink saw
(once, more than once, never) and, for any never seen, what their messages look like in
the store (status, lease, attempts) and the queues' depths.
The send lease is short (POSTROOM_SEND_LEASE_SECONDS, 30 s) so the lapsed-lease claims
and the watchdog's hand-backs happen inside the window.

    python -m bench.crash_recovery [--stored 10000] [--live 2000]"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import statistics
import threading
import time

import httpx
from pymongo import MongoClient

from bench.stack import Stack, cpu_of, print_cpu, tree
from bench.store_scale import FILLERS
from mongo.client import connect
from pipelines.core.clock import now_iso, now_ms
from tests.support import services

LEASE_SECONDS = 30
LOOKED_AT_FIELDS = ("status", "lease_token", "lease_until", "lease_ms", "attempts", "revivals", "updated_at",
                    "stall_ms", "due_ms", "last_error")


def seed_sent(url: str, database: str, count: int) -> None:
    async def go():
        client, db = connect(url, database)
        at = now_iso()
        for start in range(0, count, 2000):
            await db.messages.insert_many([FILLERS["messages"](i, at) for i in range(start, min(count, start + 2000))])
        await client.close()
    asyncio.run(go())


class StoreProbe(threading.Thread):
    """Times a find by `_id` straight on the store, back to back, beside the API's
    requests: a slow API request with a fast store is the front starved of CPU, not the
    store's lock."""

    def __init__(self, url: str, database: str):
        super().__init__(daemon=True)
        self.client = MongoClient(url)
        self.db, self.took, self.stop = self.client[database], [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            asked = time.monotonic()
            self.db.messages.find_one({"_id": "msg_fill_0000001"})
            self.took.append(time.monotonic() - asked)
            time.sleep(0.02)


def _figures(took: list[float]) -> str:
    if not took:
        return "no requests"
    took = sorted(took)
    p99 = took[min(len(took) - 1, int(len(took) * 0.99))]
    return (f"{len(took)} requests, p50 {statistics.median(took) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
            f"max {took[-1] * 1000:.0f} ms")


def live_address(i: int) -> str:
    return f"live{i:05d}@example.org"


def live_seen(stack: Stack) -> collections.Counter:
    return collections.Counter({to: n for to, n in stack.recipients_seen().items() if to.startswith("live")})


def explain_missing(stack: Stack, missing: set[str]) -> None:
    """What the store and the queues say of the live messages the sink never saw."""
    client = MongoClient(stack.store_url)
    try:
        fields = {"to": 1, **{f: 1 for f in LOOKED_AT_FIELDS}}
        found = [d for d in client[stack.database].messages.find({"kind": "transactional"}, fields)
                 if d.get("to") and d["to"][0] in missing]
    finally:
        client.close()
    print(f"{len(missing)} live recipients never reached the sink; {len(found)} of their messages are in the store")
    by_status = collections.defaultdict(list)
    for doc in found:
        by_status[doc["status"]].append(doc)
    at = now_ms()
    for status, docs in sorted(by_status.items()):
        lapsed = sum(1 for d in docs if d.get("lease_ms", 0) < at)
        print(f"  {status}: {len(docs)} ({lapsed} with their lease over), e.g.")
        for doc in docs[:3]:
            print("    " + json.dumps({f: doc.get(f) for f in ("_id", *LOOKED_AT_FIELDS)}, default=str))
    queues = services.run_postroom(stack.env, "queues", "--json").stdout
    print(f"  queues: {queues.strip()}")


def time_contacts_page(api: httpx.Client) -> tuple[float, bool]:
    """One `GET /contacts?limit=1`: (seconds, answered 200)."""
    asked = time.monotonic()
    try:
        ok = api.get("/contacts", params={"limit": 1}).status_code == 200
    except httpx.HTTPError:
        ok = False
    return time.monotonic() - asked, ok


def kill_tree(pid: int) -> None:
    for child in tree(pid):
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.crash_recovery")
    parser.add_argument("--stored", type=int, default=10_000)
    parser.add_argument("--live", type=int, default=2_000)
    parser.add_argument("--kill-after", type=int, default=300, help="messages at the sink before the kill")
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--baseline-seconds", type=float, default=20,
                        help="the request timed before any pool starts, for this run's baseline")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    env = {"POSTROOM_SEND_LEASE_SECONDS": str(LEASE_SECONDS), "POSTROOM_SMTP_TIMEOUT_SECONDS": "10",
           "POSTROOM_MESSAGE_STALL_SECONDS": "60", "POSTROOM_SCHEDULER_INTERVAL_SECONDS": "1"}
    with Stack("postroom-crash-", 4, api_timeout_seconds=120, env=env, record_recipients=True) as stack:
        start = time.monotonic()
        seed_sent(stack.store_url, stack.database, args.stored)
        print(f"{args.stored:,} sent messages stored in {time.monotonic() - start:.0f} s", flush=True)
        scheduler = stack.start("scheduler", ["scheduler"])
        for n in range(3):
            stack.api.post("/contacts", json={"email": f"someone{n}@example.org"}).raise_for_status()
        api = httpx.Client(base_url=str(stack.api.base_url), headers=dict(stack.api.headers), timeout=120)
        # this run's baseline: the same request on the same box under the same load, with
        # the messages stored and nothing to recover (no pool yet)
        before, until = [], time.monotonic() + args.baseline_seconds
        while time.monotonic() < until:
            before.append(time_contacts_page(api)[0])
        pool = stack.start("pool-1", ["worker", "-p", str(args.processes), "-t", str(args.threads)])
        for first in range(0, args.live, 1000):
            stack.api.post("/email/batch", json={"messages": [
                {"to": live_address(i), "subject": "Receipt", "text": "Thanks"}
                for i in range(first, min(args.live, first + 1000))]}).raise_for_status()
        counted = stack.counter.value
        deadline = time.monotonic() + 300
        while stack.counter.value - counted < args.kill_after and time.monotonic() < deadline:
            time.sleep(0.05)
        kill_tree(pool.proc.pid)
        killed_at, at_kill = time.monotonic(), stack.counter.value - counted
        print(f"worker pool killed (SIGKILL) with {at_kill} of {args.live} live messages at the sink", flush=True)
        pool = stack.start("pool-2", ["worker", "-p", str(args.processes), "-t", str(args.threads)])
        # CPU by process group over the recovery, and the box's load: a slow API beside an
        # idle store is CPU starvation (other work on the cores), beside a busy one a scan
        groups = stack.groups(pool=pool, scheduler=scheduler)
        cpu_before, load_before = cpu_of(groups), os.getloadavg()[0]

        latencies, errors, seen, looked_at = [], 0, collections.Counter(), 0.0
        probe = StoreProbe(stack.store_url, stack.database)
        probe.start()
        while len(seen) < args.live and time.monotonic() - killed_at < args.seconds:
            took, ok = time_contacts_page(api)
            latencies.append(took)
            errors += not ok
            # the recipients, read at most once a second and only once enough messages came
            if stack.counter.value - counted >= args.live and time.monotonic() - looked_at > 1:
                seen, looked_at = live_seen(stack), time.monotonic()
        api.close()
        recovered = time.monotonic() - killed_at
        groups = stack.groups(pool=pool, scheduler=scheduler)  # the pool's children as they are now
        cpu_used = {name: sec - cpu_before.get(name, 0.0) for name, sec in cpu_of(groups).items()}
        load_after = os.getloadavg()[0]
        probe.stop.set()
        probe.join()
        probe.client.close()
        done = stack.counter.value - counted
        seen = live_seen(stack)
        missing = {live_address(i) for i in range(args.live)} - set(seen)
        if missing:
            explain_missing(stack, missing)
    p99 = sorted(latencies)[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"recovery: {done} deliveries for {args.live} live messages at the sink {recovered:.0f} s after the kill "
          f"({args.stored:,} messages stored before; more than {args.live}: sent again after the kill, at-least-once)")
    print(f"live recipients at the sink: {len(seen)} of {args.live}, "
          f"{sum(1 for n in seen.values() if n > 1)} of them more than once")
    print(f"GET /contacts?limit=1 before any pool (the baseline): {_figures(before)}")
    print(f"GET /contacts?limit=1 during the recovery: {_figures(latencies)}, {errors} failed")
    print(f"the store beside it (find_one by _id): {_figures(probe.took)}")
    print_cpu("the recovery", cpu_used, recovered)
    print(f"load average (1 min) at the kill {load_before:.1f}, at the end {load_after:.1f} (2 cores)")
    return 0 if p99 < 1.0 and not missing else 1


if __name__ == "__main__":
    raise SystemExit(main())
