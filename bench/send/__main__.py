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
import sys
import time

from bench.stack import Stack, baseline_html, cpu_of, print_cpu, tree, wait_count

BATCH_SIZE = 1000


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.send")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--connections", type=int, default=4, help="SMTP connections per worker process")
    args = parser.parse_args()
    total = args.messages
    connections = args.connections * args.processes

    with Stack("postroom-bench-", args.connections, api_timeout_seconds=120) as stack:
        worker = stack.start("worker", ["worker", "--queues", "render,send", "-p", str(args.processes),
                                        "-t", str(args.threads)])
        time.sleep(3)  # workers connect and start consuming
        bare_rate = stack.baseline(total, connections)

        pids = {"store": [stack.store.pid], "front": tree(stack.front.proc.pid), "workers": tree(worker.proc.pid)}
        before = cpu_of(pids)
        start = time.monotonic()
        for first in range(0, total, BATCH_SIZE):
            items = [{"to": f"user{i}@example.org", "subject": "Your order", "from_name": "Acme",
                      "html": baseline_html(i)}
                     for i in range(first, min(total, first + BATCH_SIZE))]
            response = stack.api.post("/email/batch", json={"messages": items})
            response.raise_for_status()
        accepted = time.monotonic()
        end = wait_count(stack.counter, 2 * total, 1800)
        wall = end - start
        used = {name: sec - before[name] for name, sec in cpu_of(pids).items()}
        rate = total / wall
        print(f"API accepted {total} in {accepted - start:.1f}s")
        print(f"pipeline (front → RabbitMQ → render → send), {args.processes} worker processes: "
              f"{rate:,.0f} msg/s ({wall:.1f}s)")
        print(f"ratio pipeline / bare client: {rate / bare_rate:.2f}")
        print_cpu("the pipeline run", used, wall)
        return 0


if __name__ == "__main__":
    sys.exit(main())
