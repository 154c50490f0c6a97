"""bench/campaign: one campaign to 100,000 contacts through the whole pipeline (front →
RabbitMQ → campaigns fan-out → render → send) with two worker processes into a fast
local SMTP sink, beside the bare aiosmtplib baseline of bench/send measured in the same run.

    .venv/bin/python -m bench.campaign [--contacts 100000] [--processes 2] [--threads 8]

Starts its own embedded store, RabbitMQ vhost, front, scheduler and worker processes.
Contacts are bulk-inserted into the store (set-up, not measured). Prints the time from
the send call to its answer, the time until the sink accepted the last message,
recipients per second, the baseline rate and each process group's CPU seconds."""

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


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.campaign")
    parser.add_argument("--contacts", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--connections", type=int, default=4, help="SMTP connections per worker process")
    parser.add_argument("--baseline", type=int, default=20_000, help="messages the bare client sends")
    args = parser.parse_args()
    total, connections = args.contacts, args.connections * args.processes

    with Stack("postroom-bench-campaign-", args.connections, api_timeout_seconds=600) as stack:
        scheduler = stack.start("scheduler", ["scheduler"])
        worker = stack.start("worker", ["worker", "--queues", "campaigns,render,send", "-p", str(args.processes),
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
        print(f"recipients: {total:,}")
        print(f"time from send call to its answer: {answered - start:.2f}s")
        print(f"time until the sink accepted the last message: {wall:.1f}s")
        print(f"recipients per second: {rate:,.0f}")
        print(f"campaign status sent after: {completed - start:.1f}s")
        print(f"bare aiosmtplib baseline: {bare_rate:,.0f} msg/s; ratio campaign / baseline: {rate / bare_rate:.2f}")
        print_cpu("the campaign", used, wall)
        return 0


if __name__ == "__main__":
    sys.exit(main())
