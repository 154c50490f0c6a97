"""bench/send/worker_cost: one worker's CPU per message in isolation, and the store
commands each render job makes. bench.send's figures move ±10% from run to run with the
box; this runs the render jobs in this process alone (the front, store and sink in their
own), so a change to the worker's path can be compared in a minute.

    .venv/bin/python -m bench.send.worker_cost [--messages 3000] [--job 100] [--profile FILE]

The front accepts bench/send's messages (born claimed); then this process runs their
render jobs of --job messages (`render_chunk`, rendering in a thread, delivering into the
sink over 4 connections), 8 at a time, on the workers' event loop (uvloop) with their
garbage-collector settings, and prints its CPU per message and the store commands per job
by command and collection. `--profile` writes a cProfile of the event loop's thread (its
own CPU time, not wall time) to FILE."""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import os
import time

from pymongo import monitoring

from bench.stack import TEMPLATE_HTML, TEMPLATE_SUBJECT, Stack, recipients, wait_count

JOB = 100
AT_ONCE = 8


class _Commands(monitoring.CommandListener):
    def __init__(self):
        self.counting, self.counts = False, collections.Counter()

    def started(self, event):
        if self.counting:
            target = event.command.get(event.command_name)
            self.counts[(event.command_name, target if isinstance(target, str) else "")] += 1

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


def accept(stack: Stack, total: int) -> list[str]:
    template = stack.api.post("/templates", json={"name": "Order", "html": TEMPLATE_HTML}).json()["data"]["id"]
    people, ids = recipients(total), []
    for first in range(0, total, 1000):
        items = [{"to": to, "subject": TEMPLATE_SUBJECT, "from_name": "Acme", "template_id": template,
                  "template_data": data} for to, data in people[first:first + 1000]]
        response = stack.api.post("/email/batch", json={"messages": items})
        response.raise_for_status()
        ids += response.json()["data"]["message_ids"]
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.send.worker_cost")
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--job", type=int, default=JOB, help="messages a render job holds")
    args = parser.parse_args()
    commands = _Commands()
    monitoring.register(commands)
    with Stack("postroom-worker-cost-", 4, api_timeout_seconds=120) as stack:
        ids = accept(stack, args.messages)
        os.environ.update({**stack.env, "POSTROOM_RENDER_PROCESSES": "0"})
        from actors import event_loop, gc_tuning, runtime
        from actors.render_pool import render_off_loop
        from pipelines.adapters.smtp_client import transport_for
        from pipelines.core.settings import Settings
        from pipelines.workflows.render_chunk import render_chunk
        settings = Settings.from_env()
        runtime.configure(settings)
        gc_tuning.settle()  # as every worker process does

        async def run() -> None:
            db, transport, slots = runtime.store(), transport_for(settings), asyncio.Semaphore(AT_ONCE)
            born = {d["_id"]: d["lease_token"] for d in await db.messages.find({"_id": {"$in": ids}},
                                                                                 {"lease_token": 1}).to_list()}

            async def job(chunk: list[str]) -> None:
                async with slots:
                    await render_chunk(db, settings, None, render_off_loop, chunk, transport=transport,
                                       born=sorted({born[i] for i in chunk}))
            jobs = [ids[i:i + args.job] for i in range(0, len(ids), args.job)]
            await job(jobs[0])  # warm: compiled template, pooled connections, signer loaded
            profile = cProfile.Profile(time.thread_time) if args.profile else None
            commands.counting = True
            if profile:
                profile.enable()
            cpu, start = time.process_time(), time.monotonic()
            await asyncio.gather(*(job(chunk) for chunk in jobs[1:]))
            cpu, wall = time.process_time() - cpu, time.monotonic() - start
            if profile:
                profile.disable()
                profile.dump_stats(args.profile)
            commands.counting = False
            measured = len(ids) - len(jobs[0])
            print(f"{measured:,} messages in {wall:.1f}s ({measured / wall:,.0f} msg/s, one process); "
                  f"CPU a message {cpu / measured * 1000:.3f} ms" + (" (profiled)" if profile else ""))
            print(f"store commands per job of {args.job}:")
            for (name, target), count in commands.counts.most_common():
                print(f"  {count / (len(jobs) - 1):5.2f}  {name} {target}")
        event_loop.run(run())  # the workers' loop (uvloop)
        wait_count(stack.counter, len(ids), 60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
