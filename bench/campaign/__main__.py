"""bench/campaign: one campaign through the whole pipeline (front → RabbitMQ → campaigns
fan-out → render → send) with worker processes into a fast local SMTP sink, beside the
bare aiosmtplib baseline of bench/send measured in the same run.

    .venv/bin/python -m bench.campaign [--contacts 100000 ...] [--processes 2] [--scale-out 1] [--threads 8]

Each audience size in `--contacts` is a run of its own: its own embedded store, RabbitMQ
vhost, front, scheduler and worker processes. Contacts are bulk-inserted into the store
(set-up, not measured). A run prints the time from the send call to its answer, the time
until the sink accepted the last message, recipients per second, the baseline rate (the
bare client runs before and after the campaign: the box's speed drifts; the ratio is
against their mean) and each process group's CPU seconds and CPU per recipient. With several sizes the summary
compares the CPU per recipient of the smallest and the largest (it must not grow with the
audience); `--scale-out N` runs the smallest size again with N worker processes and
prints the ratio of the two throughputs. Everything at once:

    .venv/bin/python -m bench.campaign --contacts 10000 100000 --processes 2 --scale-out 1
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid

from bench.stack import Stack, cpu_of, print_cpu

SEED_CHUNK = 5000
TEMPLATE = ("<html><body><h1>Hello {{first_name|there}}</h1>"
            + "<p>Our spring collection is here. <a href=\"https://shop.example/spring\">Have a look</a>.</p>" * 10
            + "<p><a href=\"{{unsubscribe_url}}\">Unsubscribe</a></p></body></html>")


def seed_contacts(url: str, database: str, key: str, list_id: str, count: int) -> None:
    from mongo import api_keys, contacts
    from mongo.client import connect

    async def go():
        client, db = connect(url, database)
        workspace_id = (await api_keys.find_by_key(db, key))["workspace_id"]
        for first in range(0, count, SEED_CHUNK):
            await db.contacts.insert_many([
                contacts.new_document(workspace_id, email=f"c{i:06d}@bench{i % 50}.example",
                                      first_name=f"Reader {i}", lists=[list_id])
                for i in range(first, min(count, first + SEED_CHUNK))])
        await client.close()
    asyncio.run(go())


def run(total: int, processes: int, args: argparse.Namespace) -> dict:
    """One campaign to `total` contacts on a fresh stack with `processes` worker processes."""
    connections = args.connections * processes
    print(f"=== {total:,} contacts, {processes} worker process(es)", flush=True)
    with Stack("postroom-bench-campaign-", args.connections, api_timeout_seconds=600) as stack:
        scheduler = stack.start("scheduler", ["scheduler"])
        worker = stack.start("worker", ["worker", "--queues", "campaigns,render,send", "-p", str(processes),
                                        "-t", str(args.threads)])
        api = stack.api
        members = api.post("/lists", json={"name": "Everyone"}).json()["data"]
        print(f"seeding {total:,} contacts …", flush=True)
        seed_contacts(stack.store_url, stack.database, stack.key, members["id"], total)
        template = api.post("/templates", json={"name": "Spring", "html": TEMPLATE}).json()["data"]
        campaign = api.post("/campaigns", json={"name": "Spring", "subject": "Spring is here, {{first_name}}",
                                                "template_id": template["id"], "list_id": members["id"]}).json()["data"]

        baseline = min(args.baseline, total)
        bare_rate = stack.baseline(baseline, connections)

        pids = stack.groups(workers=worker, scheduler=scheduler)
        before = cpu_of(pids)
        start = time.monotonic()
        answer = api.post(f"/campaigns/{campaign['id']}/send/api", headers={"Idempotency-Key": uuid.uuid4().hex})
        answered = time.monotonic()
        answer.raise_for_status()
        print(f"send/api answered in {answered - start:.2f}s: {answer.json()['data']}", flush=True)
        next_report = time.monotonic() + 30
        counter = stack.counter
        while counter.value < baseline + total:
            if time.monotonic() > next_report:
                print(f"  … {counter.value - baseline:,} accepted after {time.monotonic() - start:.0f}s", flush=True)
                next_report += 30
            time.sleep(0.05)
        last = time.monotonic()
        while api.get(f"/campaigns/{campaign['id']}").json()["data"]["status"] != "sent":
            time.sleep(0.5)
        completed = time.monotonic()
        wall = last - start
        # the groups again: render pool processes start during the run (all their CPU falls in it)
        after = cpu_of(stack.groups(workers=worker, scheduler=scheduler))
        used = {name: sec - before[name] for name, sec in after.items()}
        rate = total / wall
        # The machine's speed drifts (other tenants): the bare client runs again after the
        # campaign, and the ratio is against the mean of its two runs.
        bare_after = stack.baseline(baseline, connections)
        bare_rate, bare_before = (bare_rate + bare_after) / 2, bare_rate
        print(f"recipients: {total:,}")
        print(f"time from send call to its answer: {answered - start:.2f}s")
        print(f"time until the sink accepted the last message: {wall:.1f}s")
        print(f"recipients per second: {rate:,.0f}")
        print(f"campaign status sent after: {completed - start:.1f}s")
        print(f"bare aiosmtplib baseline: {bare_before:,.0f} msg/s before, {bare_after:,.0f} after; "
              f"ratio campaign / their mean: {rate / bare_rate:.2f}")
        print_cpu("the campaign", used, wall)
        print("CPU per recipient: " + ", ".join(f"{name} {sec / total * 1000:.2f} ms" for name, sec in used.items()),
              flush=True)
        return {"contacts": total, "processes": processes, "answer": answered - start, "rate": rate,
                "bare_rate": bare_rate, "cpu": used, "bare_cpu_ms": sum(stack.bare_cpu_ms) / len(stack.bare_cpu_ms)}


def in_bare_units(result: dict) -> float:
    """CPU a recipient over the bare client's CPU a message in the same run: comparable
    between runs minutes apart on a box whose speed drifts."""
    return pipeline_cpu_ms(result) / result["bare_cpu_ms"]


def pipeline_cpu_ms(result: dict) -> float:
    """CPU per recipient of Postroom's processes (the sink is the measuring side)."""
    return sum(sec for name, sec in result["cpu"].items() if name != "sink") / result["contacts"] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.campaign")
    parser.add_argument("--contacts", type=int, nargs="+", default=[100_000], help="audience sizes, a run each")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--scale-out", type=int, metavar="N",
                        help="also run the smallest audience with N worker processes and compare throughputs")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--connections", type=int, default=4, help="SMTP connections per worker process")
    parser.add_argument("--baseline", type=int, default=20_000, help="messages the bare client sends")
    args = parser.parse_args()
    sizes = sorted(set(args.contacts))
    results = [run(total, args.processes, args) for total in sizes]
    if args.scale_out is not None:
        results.append(run(sizes[0], args.scale_out, args))
    print("=== summary")
    for r in results:
        print(f"{r['contacts']:>9,} contacts, {r['processes']} process(es): send/api {r['answer']:.2f}s, "
              f"{r['rate']:,.0f} recipients/s (baseline ratio {r['rate'] / r['bare_rate']:.2f}), "
              f"{pipeline_cpu_ms(r):.2f} ms CPU a recipient (store "
              f"{r['cpu']['store'] / r['contacts'] * 1000:.2f}, "
              f"workers {r['cpu']['workers'] / r['contacts'] * 1000:.2f})")
    if args.scale_out is not None:
        base, other = results[0], results[-1]
        print(f"scale-out at {base['contacts']:,}: {base['processes']} process(es) / {other['processes']} process(es) "
              f"= {base['rate'] / other['rate']:.2f}× the throughput")
    if len(sizes) > 1:
        small, large = results[0], results[len(sizes) - 1]
        print(f"CPU a recipient, {large['contacts']:,} vs {small['contacts']:,} contacts: "
              f"{pipeline_cpu_ms(large):.2f} vs {pipeline_cpu_ms(small):.2f} ms "
              f"({pipeline_cpu_ms(large) / pipeline_cpu_ms(small):.2f}×); in bare-client messages "
              f"(the bare client's CPU a message in the same run): {in_bare_units(large):.2f} vs "
              f"{in_bare_units(small):.2f} ({in_bare_units(large) / in_bare_units(small):.2f}×)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
