"""bench/automations: automations through the whole stack (front → outbox → scheduler →
`automations` actor → render → send → SMTP sink; webhooks to a local HTTP receiver), each
beside the same contacts sent a plain campaign, in one run:

- the bar (issue #34): 10,000 contacts join a list whose list_joined flow is one email
  step; recipients/s from the first run's start until every email is at the sink,
  against the campaign's from `send/api` until every email is at the sink: the ratio
  and the bar (≥ 0.5), with the CPU of each process group for the joins, the flow and
  the campaign;
- the six-step flow — tag, delay (1 day), condition, email, update_attribute, webhook —
  for the same contacts (another list): runs started/s, steps/s, the time to the delay
  and from it to the end;
- the scheduler's due pass (find due runs, hand them off) timed at 1,000 and 100,000
  waiting runs with 100 due.

    .venv/bin/python -m bench.automations [--contacts 10000] [--six-step-contacts N]
        [--waiting 1000,100000] [--processes 2] [--threads 8]

Starts its own embedded store, RabbitMQ vhost, front, scheduler and workers. The delay is
forced due by setting the waiting runs' wake time to now in the store (the clock test in
tests/e2e/test_automation_clock.py moves a real clock instead)."""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import sys
import time
import uuid

from bench.stack import Stack, cpu_of, pipeline_parser, print_cpu, tree
from ops import embedded_store
from pipelines.core.clock import parse_iso

SEED_CHUNK = 5000
JOIN_CHUNK = 500
# The bar (issue #34): a one-email flow delivers at least half the recipients/s of a campaign.
FLOW_TO_CAMPAIGN_BAR = 0.5
TEMPLATE = ("<html><body><h1>Welcome {{first_name|there}}</h1>"
            + "<p>Thanks for joining. <a href=\"https://shop.example/start\">Start here</a>.</p>" * 5
            + "<p><a href=\"{{unsubscribe_url}}\">Unsubscribe</a></p></body></html>")


# --- the webhook receiver: a separate process answering 200 to every request, counting them ---

class _Http(asyncio.Protocol):
    def __init__(self, counter):
        self.counter, self.buf = counter, b""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        head_end = self.buf.find(b"\r\n\r\n")
        if head_end < 0:
            return
        length = 0
        for line in self.buf[:head_end].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        if len(self.buf) < head_end + 4 + length:
            return
        with self.counter.get_lock():
            self.counter.value += 1
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        self.transport.close()


def _receiver_main(port, counter, ready):
    async def serve():
        server = await asyncio.get_running_loop().create_server(lambda: _Http(counter), "127.0.0.1", port)
        ready.set()
        await server.serve_forever()
    asyncio.run(serve())


def start_receiver():
    port, counter, ready = embedded_store.free_port(), multiprocessing.Value("q", 0), multiprocessing.Event()
    process = multiprocessing.Process(target=_receiver_main, args=(port, counter, ready), daemon=True)
    process.start()
    ready.wait(30)
    return process, port, counter


# --- store access for set-up and progress --------------------------------------------------------

def store_call(url: str, database: str, fn):
    from mongo.client import connect

    async def go():
        client, db = connect(url, database)
        try:
            return await fn(db)
        finally:
            await client.close()
    return asyncio.run(go())


def seed_contacts(stack, key: str, count: int) -> list[str]:
    from mongo import api_keys, contacts

    async def go(db):
        workspace_id = (await api_keys.find_by_key(db, key))["workspace_id"]
        ids = []
        for first in range(0, count, SEED_CHUNK):
            docs = [contacts.new_document(workspace_id, email=f"a{i:06d}@bench{i % 50}.example",
                                          first_name=f"Reader {i}", attributes={"plan": "pro" if i % 2 else "free"})
                    for i in range(first, min(count, first + SEED_CHUNK))]
            await db.contacts.insert_many(docs)
            ids += [d["_id"] for d in docs]
        return ids
    return store_call(stack.store_url, stack.database, go)


def run_counts(stack, scope: dict | None = None) -> dict[str, int]:
    """Runs per phase (`phase:…`) and per status, of the runs `scope` matches (all by default)."""
    match = [{"$match": scope}] if scope else []

    async def go(db):
        rows = await (await db.automation_runs.aggregate(
            [*match, {"$group": {"_id": "$phase", "n": {"$sum": 1}}}])).to_list()
        done = await (await db.automation_runs.aggregate(
            [*match, {"$group": {"_id": "$status", "n": {"$sum": 1}}}])).to_list()
        return {**{f"phase:{r['_id']}": r["n"] for r in rows}, **{r["_id"]: r["n"] for r in done}}
    return store_call(stack.store_url, stack.database, go)


def history_entries(stack, scope: dict | None = None) -> int:
    async def go(db):
        count_entries = [*([{"$match": scope}] if scope else []),
                         {"$unwind": "$history"}, {"$group": {"_id": None, "n": {"$sum": 1}}}]
        rows = await (await db.automation_runs.aggregate(count_entries)).to_list()
        return rows[0]["n"] if rows else 0
    return store_call(stack.store_url, stack.database, go)


class _NoSubscriptions:
    async def webhook_turns(self, turns):
        raise AssertionError("the bench's workspace has no webhook subscription")


def dispatch_join_events(stack) -> int:
    """The webhook fan-out of the joins' events (list.member_added, contact.subscribed),
    done by the scheduler's own workflow before the flow's clock starts: a campaign's
    audience has these behind it too (here, the campaign's is the same list). With no
    subscription each is only marked dispatched. How many events."""
    from pipelines.workflows.dispatch_webhook_events import dispatch_outbox

    async def go(db):
        done = 0
        while handled := await dispatch_outbox(db, _NoSubscriptions()):
            done += handled
        return done
    return store_call(stack.store_url, stack.database, go)


def first_run_epoch(stack, automation_id: str) -> float:
    """When the automation's first run was started (epoch seconds, from its `created_at`)."""
    async def go(db):
        first = await db.automation_runs.find({"automation_id": automation_id}, {"created_at": 1},
                                              sort=[("created_at", 1)], limit=1).to_list()
        return first[0]["created_at"]
    return parse_iso(store_call(stack.store_url, stack.database, go)).timestamp()


def force_delays_due(stack) -> int:
    async def go(db):
        result = await db.automation_runs.update_many({"phase": "waiting"}, {"$set": {"wake_ms": 0}})
        return result.modified_count
    return store_call(stack.store_url, stack.database, go)


def wait_for(check, what: str, timeout: float = 3600, every: float = 1.0, report: float = 30.0):
    start = last = time.monotonic()
    while True:
        value = check()
        if value:
            return time.monotonic()
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"{what} not reached in {timeout}s")
        if time.monotonic() - last > report:
            print(f"  … waiting for {what} ({time.monotonic() - start:.0f}s)", flush=True)
            last = time.monotonic()
        time.sleep(every)


# --- the scheduler's due pass ------------------------------------------------------------------------

def due_pass_times(url: str, sizes: list[int], due: int = 100, repeat: int = 5) -> dict[int, float]:
    """Median time of one due pass (mongo.automation_runs.due + hand_off) over `size` waiting
    runs of which `due` have come due; the handed-off runs are made due again between passes."""
    from mongo import automation_runs as run_store
    from mongo.indexes import ensure_indexes
    from pipelines.automations import runs

    async def go(db):
        await ensure_indexes(db)
        far = runs.now_ms() + 30 * 86400 * 1000
        out, made = {}, 0
        for size in sizes:
            while made < size:
                batch = [{"_id": f"run_bench_{i:08d}", "workspace_id": "bench", "automation_id": "bench",
                          "contact_id": f"c{i}", "status": "active", "phase": "waiting", "version": 0,
                          "wake_ms": far + i, "wait_event": "", "history": []}
                         for i in range(made, min(size, made + SEED_CHUNK))]
                await db.automation_runs.insert_many(batch)
                made += len(batch)
            due_ids = [f"run_bench_{i:08d}" for i in range(0, size, size // due)][:due]
            times = []
            for _ in range(repeat):
                await db.automation_runs.update_many({"_id": {"$in": due_ids}},
                                                     {"$set": {"wake_ms": 0, "phase": "waiting"}})
                started = time.perf_counter()
                found = await run_store.due(db, runs.now_ms(), 500)
                await run_store.hand_off(db, found, runs.now_ms())
                times.append(time.perf_counter() - started)
                assert len(found) == due, (len(found), due)
            out[size] = statistics.median(times)
            # far again: the hand-off made them due a grace period on, which the next size's
            # seeding can outlast
            await db.automation_runs.update_many({"_id": {"$in": due_ids}}, {"$set": {"wake_ms": far}})
        return out
    return store_call(url, f"bench_due_{uuid.uuid4().hex[:8]}", go)


def one_email_flow_against_campaign(stack, pids: dict, template: dict, ids: list[str],
                                    start_scheduler) -> tuple[float, float]:
    """The bar's case: a flow of one email step, triggered by the contacts joining a list,
    against the same list sent as a plain campaign. The joins are made before the
    scheduler runs, so their trigger events wait in the outbox, and their webhook fan-out
    is done then (`dispatch_join_events`); then the scheduler is started
    (`start_scheduler`, which returns its process). The flow's clock runs from its
    first run's start (the run's `created_at`) until every email is at the sink; from the
    scheduler's start (its process start-up included) and with the joins' own time, which
    a campaign's audience has behind it too, are printed beside it. The campaign's clock
    runs from `send/api` until every email is at the sink. Returns both recipients/s."""
    api, total = stack.api, len(ids)
    members = api.post("/lists", json={"name": "Welcome mail"}).json()["data"]
    flow = api.post("/automations", json={
        "name": "One email", "trigger_type": "list_joined", "trigger_config": {"list_id": members["id"]},
        "steps": [{"id": "mail", "step_type": "email",
                   "config": {"templateId": template["id"], "subject": "Welcome, {{first_name}}"}}]}).json()["data"]
    assert api.patch(f"/automations/{flow['id']}", json={"status": "active"}).status_code == 200
    sent_before, before = stack.counter.value, cpu_of(pids)
    joining = time.monotonic()
    for first in range(0, total, JOIN_CHUNK):
        api.post(f"/lists/{members['id']}/members", json={"contact_ids": ids[first:first + JOIN_CHUNK]})
    dispatched = dispatch_join_events(stack)
    start, start_epoch = time.monotonic(), time.time()
    print_cpu("the joins (their events dispatched)", {name: sec - before[name] for name, sec in cpu_of(pids).items()},
              start - joining)
    before = cpu_of(pids)
    pids["scheduler"] = tree(start_scheduler().proc.pid)
    before["scheduler"] = 0.0
    flow_done = wait_for(lambda: stack.counter.value >= sent_before + total, "every flow email", every=0.2)
    first_run = start + first_run_epoch(stack, flow["id"]) - start_epoch
    flow_wall = flow_done - first_run
    print_cpu("the one-email flow", {name: sec - before[name] for name, sec in cpu_of(pids).items()},
              flow_done - start)
    completed = run_counts(stack, {"automation_id": flow["id"]}).get("completed", 0)
    print(f"one-email flow: {total:,} joins answered and their {dispatched:,} events dispatched in "
          f"{start - joining:.1f}s (the trigger events wait for the scheduler's automations pass); "
          f"the scheduler started, its first run {first_run - start:.1f}s later; every email at the sink "
          f"{flow_wall:.1f}s after the first run started: {total / flow_wall:,.0f} recipients/s "
          f"({completed:,} runs completed); from the scheduler's start {total / (flow_done - start):,.0f}/s, "
          f"with the joins' time {total / (flow_done - joining):,.0f}/s", flush=True)

    sent_before, before = stack.counter.value, cpu_of(pids)
    campaign = api.post("/campaigns", json={"name": "Same people", "subject": "Welcome, {{first_name}}",
                                            "template_id": template["id"], "list_id": members["id"]}).json()["data"]
    sending = time.monotonic()
    answer = api.post(f"/campaigns/{campaign['id']}/send/api", headers={"Idempotency-Key": uuid.uuid4().hex})
    answer.raise_for_status()
    campaign_done = wait_for(lambda: stack.counter.value >= sent_before + total, "every campaign email", every=0.2)
    campaign_wall = campaign_done - sending
    print_cpu("the campaign", {name: sec - before[name] for name, sec in cpu_of(pids).items()}, campaign_wall)
    print(f"plain campaign to the same {total:,} contacts: every email at the sink in {campaign_wall:.1f}s: "
          f"{total / campaign_wall:,.0f} recipients/s", flush=True)
    ratio = campaign_wall / flow_wall
    print(f"ONE-EMAIL FLOW / CAMPAIGN (recipients/s): {ratio:.2f} (bar ≥ {FLOW_TO_CAMPAIGN_BAR}: "
          f"{'met' if ratio >= FLOW_TO_CAMPAIGN_BAR else 'NOT met'}); from the scheduler's start "
          f"{campaign_wall / (flow_done - start):.2f}, with the joins' time "
          f"{campaign_wall / (flow_done - joining):.2f}", flush=True)
    return total / flow_wall, total / campaign_wall


def six_step_flow(stack, pids, template: dict, ids: list[str], receiver_port: int, hooks,
                  campaign_rate: float) -> None:
    """The six-step flow (tag, delay, condition, email, update_attribute, webhook) through
    the whole stack: runs started/s, steps/s, the time to the delay and from it to the end."""
    api, total = stack.api, len(ids)
    members = api.post("/lists", json={"name": "Joiners"}).json()["data"]
    flow = api.post("/automations", json={
        "name": "Welcome flow", "trigger_type": "list_joined", "trigger_config": {"list_id": members["id"]},
        "steps": [
            {"id": "tag", "step_type": "tag", "config": {"tagName": "joined"}},
            {"id": "wait", "step_type": "delay", "config": {"duration": 1, "unit": "days"}},
            {"id": "check", "step_type": "condition",
             "config": {"field": "subscribed", "operator": "equals", "value": True, "falseBranchStepId": "mark"}},
            {"id": "mail", "step_type": "email", "config": {"templateId": template["id"],
                                                            "subject": "Welcome, {{first_name}}"}},
            {"id": "mark", "step_type": "update_attribute",
             "config": {"attributeName": "onboarded", "attributeValue": "yes"}},
            {"id": "hook", "step_type": "webhook", "config": {
                "url": f"http://127.0.0.1:{receiver_port}/hook", "body": {"email": "{{email}}"}}}]}).json()["data"]
    assert api.patch(f"/automations/{flow['id']}", json={"status": "active"}).status_code == 200
    flow_runs = {"automation_id": flow["id"]}
    sent_before, before = stack.counter.value, cpu_of(pids)
    start = time.monotonic()
    for first in range(0, total, JOIN_CHUNK):
        api.post(f"/lists/{members['id']}/members", json={"contact_ids": ids[first:first + JOIN_CHUNK]})
    joined = time.monotonic()
    print(f"six-step flow: {total:,} joins answered in {joined - start:.1f}s", flush=True)
    counts = lambda: run_counts(stack, flow_runs)  # noqa: E731
    all_started = wait_for(lambda: counts().get("active", 0) + counts().get("completed", 0) >= total,
                           "every run started")
    at_delay = wait_for(lambda: counts().get("phase:waiting", 0) >= total, "every run at the delay")
    steps_before = history_entries(stack, flow_runs)
    forced = time.monotonic()
    print(f"forcing {force_delays_due(stack):,} delays due", flush=True)
    done = wait_for(lambda: counts().get("completed", 0) >= total, "every run completed")
    mails_done = wait_for(lambda: stack.counter.value >= sent_before + total, "every email accepted", every=0.2)
    steps = history_entries(stack, flow_runs)
    used = {name: sec - before[name] for name, sec in cpu_of(pids).items()}
    flow_wall = (at_delay - start) + (done - forced)

    print(f"runs started per second (joins → runs): {total / (all_started - start):,.0f}")
    print(f"steps per second (history entries, {steps:,} over the engine's {flow_wall:.1f}s): "
          f"{steps / flow_wall:,.0f}  (before the delay: {steps_before / (at_delay - start):,.0f}/s, "
          f"after: {(steps - steps_before) / (done - forced):,.0f}/s)")
    print(f"time until every run reached the delay: {at_delay - start:.1f}s; from the delay forced due "
          f"until every run completed: {done - forced:.1f}s (emails accepted by then: "
          f"{max(mails_done, done) - forced:.1f}s); webhooks received: {hooks.value:,}")
    print_cpu("the six-step flow", used, (at_delay - start) + (done - forced))
    print(f"the six-step flow took {flow_wall:.1f}s of engine time for {total:,} contacts: "
          f"{flow_wall * campaign_rate / total:.1f}× the plain campaign's time", flush=True)


def main() -> int:
    parser = pipeline_parser("python -m bench.automations")
    parser.add_argument("--contacts", type=int, default=10_000)
    parser.add_argument("--six-step-contacts", type=int, default=None,
                        help="contacts through the six-step flow (default: --contacts; 0 leaves it out)")
    parser.add_argument("--waiting", default="1000,100000", help="waiting-run counts for the due-pass timing")
    args = parser.parse_args()
    total = args.contacts
    six_step = total if args.six_step_contacts is None else args.six_step_contacts
    receiver, receiver_port, hooks = start_receiver()

    with Stack("postroom-bench-automations-", args.connections, api_timeout_seconds=600,
               env={"POSTROOM_ALLOW_PRIVATE_TARGETS": "1"}) as stack:
        worker = stack.start("worker", ["worker", "--queues", "automations,campaigns,render,send,webhooks",
                                        "-p", str(args.processes), "-t", str(args.threads)])
        template = stack.api.post("/templates", json={"name": "Welcome", "html": TEMPLATE}).json()["data"]
        print(f"seeding {max(total, six_step):,} contacts …", flush=True)
        ids = seed_contacts(stack, stack.key, max(total, six_step))

        wait_for(lambda: len(tree(worker.proc.pid)) >= args.processes + 1, "the worker processes", every=0.2)
        pids = stack.groups(workers=worker)
        _, campaign_rate = one_email_flow_against_campaign(stack, pids, template, ids[:total],
                                                           lambda: stack.start("scheduler", ["scheduler"]))
        if six_step:
            six_step_flow(stack, pids, template, ids[:six_step], receiver_port, hooks, campaign_rate)

        sizes = [int(n) for n in args.waiting.split(",") if n]
        if sizes:
            print("scheduler due pass, 100 due among waiting runs: ", end="", flush=True)
            times = due_pass_times(stack.store_url, sizes)
            print(", ".join(f"{n:,} waiting {t * 1000:.1f} ms" for n, t in times.items()))
    receiver.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
