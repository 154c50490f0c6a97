"""bench/api: single `POST /email/send` requests (one recipient, an HTML body) at 32
concurrent connections, to the real front (Hypercorn, as `postroom front` runs it, on the
embedded store and RabbitMQ) and, in the same run, to a bare baseline app (Quart +
pydantic validating the same body + one Dramatiq publish with confirms, bench/api/baseline.py)
served the same way. The same load generator (bench/api/load.py: raw asyncio HTTP/1.1,
~0.1 ms of CPU a request, so it leaves the cores to the apps) drives both.

    .venv/bin/python -m bench.api [--requests 5000] [--connections 32] [--processes 2] [--threads 8]
                                  [--without-workers-only]

Two rounds: without workers (the jobs just queue; purged after) and with the render + send
workers delivering into bench/send's SMTP sink. Each runs the baseline, ours, and the
baseline again (the box's speed drifts), and prints requests/s, p50 and p99 of each, the
ratio ours / the mean of the two baseline runs, and each process group's CPU during each.
`--without-workers-only` runs the first round alone (the one the bar is on), for a quick
comparison of a change to the front."""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

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


def measure(label: str, url: str, key: str, first: int, count: int, connections: int,
            groups: dict[str, list[int]]) -> dict:
    headers = {"Authorization": f"Bearer {key}"}
    asyncio.run(drive(url, PATH, headers, body, range(first, first + WARM_UP), connections, 202))
    before = cpu_of(groups)
    wall, latencies = asyncio.run(drive(url, PATH, headers, body, range(first + WARM_UP, first + WARM_UP + count),
                                        connections, 202))
    used = {name: sec - before[name] for name, sec in cpu_of(groups).items()}
    result = {"rate": count / wall, "p50": percentile(latencies, 50) * 1000, "p99": percentile(latencies, 99) * 1000}
    print(f"  {label}: {result['rate']:,.0f} requests/s, p50 {result['p50']:.1f} ms, p99 {result['p99']:.1f} ms "
          f"({count:,} in {wall:.1f}s)", flush=True)
    print_cpu(label, used, wall)
    print("    CPU per request: " + ", ".join(f"{name} {sec / count * 1000:.2f} ms" for name, sec in used.items()
                                             if sec > 0), flush=True)
    return result


def round_(title: str, stack: Stack, baseline: Baseline, args, first: int, workers=None) -> None:
    print(f"\n{title}", flush=True)
    own = {"load generator": [os.getpid()], "rabbitmq": broker_pids()}  # the broker's share of the cores
    extra = {"workers": tree(workers.proc.pid)} if workers else {}
    base_groups = {"baseline": [baseline.proc.pid], **own, **extra}
    base = measure("baseline (Quart + pydantic + Dramatiq publish)", baseline.url, stack.key, first,
                   args.requests, args.connections, base_groups)
    groups = {"front": tree(stack.front.proc.pid), "store": [stack.store.pid], **own, **extra,
              **({"sink": [stack.sink.pid]} if workers else {})}
    ours = measure("postroom front", stack.base_url, stack.key, first + args.requests + WARM_UP,
                   args.requests, args.connections, groups)
    # The machine's speed drifts (other tenants): the baseline runs again after ours, and
    # the ratio is against the mean of its two runs.
    again = measure("baseline again", baseline.url, stack.key, first + 2 * (args.requests + WARM_UP),
                    args.requests, args.connections, base_groups)
    print(f"  ratio ours / baseline: {2 * ours['rate'] / (base['rate'] + again['rate']):.2f} (bar ≥ 0.8); "
          f"p99 {ours['p99']:.0f} ms (bar < 100 ms; the baseline's {base['p99']:.0f} and {again['p99']:.0f} ms)",
          flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.api")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--processes", type=int, default=2, help="worker processes in the second round")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--without-workers-only", action="store_true",
                        help="only the first round (the bar's): a quicker A/B of a front change")
    args = parser.parse_args()
    per_round = 3 * (args.requests + WARM_UP)

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
            wait_count(stack.counter, args.requests + WARM_UP, 600)
            print(f"  all {args.requests + WARM_UP:,} of ours delivered to the sink "
                  f"{time.monotonic() - start:.1f}s after the last answer", flush=True)
            purge(stack.vhost, BASELINE_QUEUE)
        finally:
            baseline.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
