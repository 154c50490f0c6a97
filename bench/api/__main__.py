"""bench/api: single `POST /email/send` requests (one recipient, an HTML body) at 32
concurrent connections, to the real front (Hypercorn, as `postroom front` runs it, on the
embedded store and RabbitMQ) and, in the same run, to a bare baseline app (Quart +
pydantic validating the same body + one Dramatiq publish with confirms, bench/api/baseline.py)
served the same way. The same load generator (bench/api/load.py: raw asyncio HTTP/1.1 on
uvloop, as both apps run, ~0.05 ms of CPU a request, so it leaves the cores to the apps)
drives both.

    .venv/bin/python -m bench.api [--requests 9000] [--slices 6] [--connections 32] [--processes 2]
                                  [--threads 8] [--without-workers-only]

Two rounds: without workers (the jobs just queue; purged after) and with the render + send
workers delivering into bench/send's SMTP sink. In each, after a warm-up of each app, the
baseline and ours take turns in slices (`--requests` per app split into `--slices`, in
pairs of alternating order: B O, O B, B O, …), because the box's speed drifts by ±15%
within a minute: run one after the other, the two apps met different machines, and the
ratio moved by ±0.1 between runs of the same code. Printed per app: requests/s over its
slices (and each slice's), p50 and p99 of all its requests, each process group's CPU per
request; then the ratio ours / baseline and the range of the slice pairs' ratios.
`--without-workers-only` runs the first round alone (the one the bar is on), for a quick
comparison of a change to the front."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from actors import event_loop
from bench.stack import Stack, broker_pids, cpu_of, print_cpu, tree, wait_count
from ops import embedded_store
from tests.support import services

from .baseline import QUEUE as BASELINE_QUEUE
from .load import drive

WARM_UP = 300
PATH = "/api/v1/email/send"
HTML = ("<html><body><h1>Your receipt</h1>"
        + "<p>Thank you for your order. It ships within two days; track it from your account.</p>" * 12
        + "</body></html>")  # ~1.2 KB


def body(i: int) -> dict:
    return {"to": f"reader{i}@bench{i % 20}.example", "subject": f"Your receipt {i}", "html": HTML,
            "from_name": "Acme"}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


class Baseline:
    """The baseline app in its own process (bench/api/baseline.py)."""

    def __init__(self, stack: Stack):
        self.name, self.port = "baseline", embedded_store.free_port()
        self.log = open(stack.run_dir / "baseline.log", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.api.baseline", str(self.port),
                                      stack.env["POSTROOM_AMQP_URL"]], env=stack.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        services.wait_healthy(self.url, self)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 40) -> str:
        return "\n".join(open(self.log.name, errors="replace").read().splitlines()[-lines:])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def queue_depth(vhost: str, queue: str) -> int:
    out = subprocess.run(["rabbitmqctl", "-q", "list_queues", "-p", vhost, "name", "messages"],
                         capture_output=True, text=True, check=True).stdout
    return next((int(n) for name, n in (line.split() for line in out.splitlines() if line.strip())
                 if name == queue), 0)


def purge(vhost: str, *queues: str) -> None:
    for queue in queues:
        subprocess.run(["rabbitmqctl", "-q", "purge_queue", "-p", vhost, queue], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Tally:
    """One app's slices of a round, summed: requests, wall, latencies, CPU by process group."""

    def __init__(self, label: str, url: str, groups: dict[str, list[int]]):
        self.label, self.url, self.groups = label, url, groups
        self.count, self.wall, self.latencies, self.cpu = 0, 0.0, [], dict.fromkeys(groups, 0.0)
        self.rates: list[float] = []

    def drive(self, key: str, numbers: range, connections: int) -> tuple[float, list[float]]:
        """Single sends numbered `numbers`, unrecorded: (wall seconds, latencies)."""
        return event_loop.run(drive(self.url, PATH, {"Authorization": f"Bearer {key}"}, body, numbers,
                                    connections, 202))

    def run(self, key: str, numbers: range, connections: int) -> None:
        """One recorded slice."""
        before = cpu_of(self.groups)
        wall, latencies = self.drive(key, numbers, connections)
        for name, sec in cpu_of(self.groups).items():
            self.cpu[name] += sec - before[name]
        self.count, self.wall = self.count + len(numbers), self.wall + wall
        self.latencies += latencies
        self.rates.append(len(numbers) / wall)

    def report(self) -> dict:
        result = {"rate": self.count / self.wall, "p50": percentile(self.latencies, 50) * 1000,
                  "p99": percentile(self.latencies, 99) * 1000}
        print(f"  {self.label}: {result['rate']:,.0f} requests/s, p50 {result['p50']:.1f} ms, "
              f"p99 {result['p99']:.1f} ms ({self.count:,} in {self.wall:.1f}s; slices "
              + ", ".join(f"{r:,.0f}" for r in self.rates) + ")", flush=True)
        print_cpu(self.label, self.cpu, self.wall)
        print("    CPU per request: " + ", ".join(f"{name} {sec / self.count * 1000:.2f} ms"
                                                 for name, sec in self.cpu.items() if sec > 0), flush=True)
        return result


def slice_order(slices: int) -> list[int]:
    """Which app runs each slice (0 the baseline, 1 ours), in pairs of alternating order
    (0 1, 1 0, 0 1, …): a drift of the box's speed during the round falls on both alike."""
    return [app for n in range(slices) for app in ((0, 1) if n % 2 == 0 else (1, 0))]


def round_(title: str, stack: Stack, baseline: Baseline, args, first: int, workers=None) -> None:
    print(f"\n{title}", flush=True)
    own = {"load generator": [os.getpid()], "rabbitmq": broker_pids()}  # the broker's share of the cores
    extra = {"workers": tree(workers.proc.pid)} if workers else {}
    apps = (Tally("baseline (Quart + pydantic + Dramatiq publish)", baseline.url,
                  {"baseline": [baseline.proc.pid], **own, **extra}),
            Tally("postroom front", stack.base_url,
                  {"front": tree(stack.front.proc.pid), "store": [stack.store.pid], **own, **extra,
                   **({"sink": [stack.sink.pid]} if workers else {})}))
    next_number = first
    for app in apps:
        app.drive(stack.key, range(next_number, next_number + WARM_UP), args.connections)
        next_number += WARM_UP
    size = args.requests // args.slices
    for app in slice_order(args.slices):
        apps[app].run(stack.key, range(next_number, next_number + size), args.connections)
        next_number += size
    base, ours = (app.report() for app in apps)
    pairs = sorted(o / b for b, o in zip(apps[0].rates, apps[1].rates, strict=True))
    print(f"  ratio ours / baseline: {ours['rate'] / base['rate']:.2f} (bar ≥ 0.8; slice pairs "
          f"{pairs[0]:.2f}–{pairs[-1]:.2f}, median {pairs[len(pairs) // 2]:.2f}); p99 {ours['p99']:.0f} ms "
          f"(bar < 100 ms; the baseline's {base['p99']:.0f} ms)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.api")
    parser.add_argument("--requests", type=int, default=9000, help="per app and round")
    parser.add_argument("--slices", type=int, default=6, help="slices per app, interleaved with the other's")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--processes", type=int, default=2, help="worker processes in the second round")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--without-workers-only", action="store_true",
                        help="only the first round (the bar's): a quicker A/B of a front change")
    args = parser.parse_args()
    per_round = 2 * (args.requests + WARM_UP)

    with Stack("postroom-bench-api-", smtp_connections=4, api_timeout_seconds=60) as stack:
        stack.base_url = str(stack.api.base_url).removesuffix("/api/v1/").removesuffix("/api/v1")
        baseline = Baseline(stack)
        try:
            round_("Without workers (jobs queue; purged after)", stack, baseline, args, 0)
            print(f"  queued: render {queue_depth(stack.vhost, 'render'):,}, "
                  f"baseline {queue_depth(stack.vhost, BASELINE_QUEUE):,}", flush=True)
            purge(stack.vhost, "render", BASELINE_QUEUE)
            if args.without_workers_only:
                return 0
            worker = stack.start("worker", ["worker", "--queues", "render,send", "-p", str(args.processes),
                                            "-t", str(args.threads)])
            time.sleep(3)  # workers connect and start consuming
            round_(f"With {args.processes} render + send worker processes delivering into the SMTP sink",
                   stack, baseline, args, per_round, workers=worker)
            start = time.monotonic()
            wait_count(stack.counter, args.requests // args.slices * args.slices + WARM_UP, 600)
            print(f"  all {args.requests // args.slices * args.slices + WARM_UP:,} of ours delivered to the sink "
                  f"{time.monotonic() - start:.1f}s after the last answer", flush=True)
            purge(stack.vhost, BASELINE_QUEUE)
        finally:
            baseline.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
