"""bench/send: 20,000 personalised transactional sends through the whole pipeline
(front → RabbitMQ → render → send) into a fast local SMTP sink, beside a bare aiosmtplib
client sending the same messages, prebuilt, over the same number of connections to the
same sink, in the same run. Each send names one stored ~20 KB template (12 merge tags,
an {{#if}}, a 5-item {{#each}}) and brings its own template_data; the render actor fills it.

    .venv/bin/python -m bench.send [--messages 20000] [--processes 2] [--threads 8]

Starts its own embedded store, RabbitMQ vhost, front and worker processes. Prints both
rates (the bare client runs before and after the pipeline: the box's speed drifts), their
ratio (against the mean of the two bare runs), each process group's CPU seconds during
the pipeline run and per message (the store's share tells whether the store bounds it),
and the mean size of the messages each delivered."""

from __future__ import annotations

import json
import os
import sys
import time

from bench.stack import (
    TEMPLATE_HTML,
    TEMPLATE_SUBJECT,
    Stack,
    broker_pids,
    cpu_of,
    pipeline_parser,
    print_cpu,
    recipients,
    wait_count,
)

BATCH_SIZE = 1000


def main() -> int:
    parser = pipeline_parser("python -m bench.send")
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args()
    total = args.messages
    connections = args.connections * args.processes

    with Stack("postroom-bench-", args.connections, api_timeout_seconds=120) as stack:
        worker = stack.start("worker", ["worker", "--queues", "render,send", "-p", str(args.processes),
                                        "-t", str(args.threads)])
        time.sleep(3)  # workers connect and start consuming
        bare_rate = stack.baseline(total, connections)
        template = stack.api.post("/templates", json={"name": "Order", "html": TEMPLATE_HTML})
        template.raise_for_status()
        people, template_id, bare_bytes = recipients(total), template.json()["data"]["id"], stack.sink_bytes.value

        # the request bodies encoded before the clock starts, as the bare client's messages
        # are built before its own: the client's work is not the pipeline's
        bodies = [json.dumps({"messages": [
            {"to": to, "subject": TEMPLATE_SUBJECT, "from_name": "Acme", "template_id": template_id,
             "template_data": template_data} for to, template_data in people[first:first + BATCH_SIZE]]}).encode()
            for first in range(0, total, BATCH_SIZE)]
        outside = {"bench client": [os.getpid()], "rabbitmq": broker_pids()}  # shown apart, per message
        pids = stack.groups(workers=worker)
        before, outside_before = cpu_of(pids), cpu_of(outside)
        start = time.monotonic()
        for content in bodies:
            response = stack.api.post("/email/batch", content=content, headers={"Content-Type": "application/json"})
            response.raise_for_status()
        accepted = time.monotonic()
        end = wait_count(stack.counter, 2 * total, 1800)
        wall = end - start
        # the groups again: render pool processes start during the run (all their CPU falls in it)
        after, outside_after = cpu_of(stack.groups(workers=worker)), cpu_of(outside)
        used = {name: sec - before[name] for name, sec in after.items()}
        beside = {name: sec - outside_before[name] for name, sec in outside_after.items()}
        rate = total / wall
        pipeline_bytes = stack.sink_bytes.value - bare_bytes
        print(f"API accepted {total} in {accepted - start:.1f}s")
        print(f"pipeline (front → RabbitMQ → render → send), {args.processes} worker processes: "
              f"{rate:,.0f} msg/s ({wall:.1f}s)")
        print_cpu("the pipeline run", used, wall)
        print("    CPU per message: " + ", ".join(f"{name} {sec / total * 1000:.2f} ms" for name, sec in used.items()),
              flush=True)
        print("    beside the pipeline, on the same cores: " +
              ", ".join(f"{name} {sec:.1f}s ({sec / wall:.0%} of wall)" for name, sec in beside.items()), flush=True)
        # The machine's speed drifts (other tenants): the bare client runs again after the
        # pipeline, and the ratio is against the mean of its two runs.
        bare_after = stack.baseline(total, connections)
        bare_mean = (bare_rate + bare_after) / 2
        print(f"ratio pipeline / bare client: {rate / bare_mean:.2f} (bare client {bare_rate:,.0f} before, "
              f"{bare_after:,.0f} after the pipeline)")
        print(f"mean message size: pipeline {pipeline_bytes / total / 1024:.1f} KB, "
              f"bare client {bare_bytes / total / 1024:.1f} KB")
        return 0


if __name__ == "__main__":
    sys.exit(main())
