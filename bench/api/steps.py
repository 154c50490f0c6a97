"""bench/api/steps: what each step of a single `POST /email/send` costs on its own, one
after the other from one client, against the embedded store and RabbitMQ: the mean wall
time per call and the CPU it takes in this (the front's) process and in the store.

    .venv/bin/python -m bench.api.steps [--calls 500]

The steps are the store and broker calls the front makes per send, called as it calls
them (a warm in-process cache answers the cached ones without the store)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.stack import cpu_seconds, make_tenant
from ops import embedded_store
from tests.support import services


async def measure_steps(store_url: str, database: str, key: str, calls: int) -> list[tuple[str, float, float, float]]:
    from actors import broker as broker_setup
    from actors.publish import publish
    from actors.render import render_messages
    from mongo import (
        api_keys,
        domains,
        idempotency,
        message_intake,
        rate_windows,
        send_limits,
        suppressions,
        workspaces,
    )
    from mongo.client import connect
    from ops import config

    broker_setup.setup(config.load())
    client, db = connect(store_url, database)
    key_doc = await api_keys.find_by_key(db, key)
    ws_id = key_doc["workspace_id"]
    counter = iter(range(10**9))

    def message() -> dict:
        n = next(counter)
        return {"_id": f"steps-{n}", "workspace_id": ws_id, "status": "failed", "to": [f"r{n}@example.org"],
                "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}

    steps = {
        "key lookup": lambda: api_keys.recent_by_key(db, key),
        "workspace lookup": lambda: workspaces.recent(db, ws_id),
        "request rate window": lambda: rate_windows.hit(db, "req", key_doc["_id"], limit=10**9),
        "email rate window": lambda: rate_windows.hit(db, "email", key_doc["_id"], limit=10**9),
        "idempotency claim + complete": lambda: _idempotent(db, idempotency, ws_id, next(counter)),
        "plan usage": lambda: send_limits.charge_plan(db, ws_id, "2026-11", 1, 0),
        "suppression lookup": lambda: suppressions.reasons_among(db, ws_id, ["someone@example.org"]),
        "domain lookup": lambda: domains.verified_map(db, ws_id),
        "insert": lambda: message_intake.insert_new(db, [message()]),
        "publish with confirms": lambda: publish(render_messages, ["steps-none"]),
    }
    out = []
    store_pid = _store_pid(store_url)
    for name, step in steps.items():
        for _ in range(20):
            await step()
        own, store, start = cpu_seconds(os.getpid()), cpu_seconds(store_pid), time.perf_counter()
        for _ in range(calls):
            await step()
        wall = time.perf_counter() - start
        out.append((name, wall / calls * 1000, (cpu_seconds(os.getpid()) - own) / calls * 1000,
                    (cpu_seconds(store_pid) - store) / calls * 1000))
    await client.close()
    return out


async def _idempotent(db, idempotency, ws_id: str, n: int) -> None:
    await idempotency.claim(db, ws_id, f"k{n}", "f", 60)
    await idempotency.complete(db, ws_id, f"k{n}", {"status": 202, "body": {}})


STORE_PID: dict[str, int] = {}


def _store_pid(url: str) -> int:
    return STORE_PID[url]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.api.steps")
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="postroom-bench-steps-"))
    store, url = embedded_store.start(run_dir)
    STORE_PID[url] = store.pid
    vhost, amqp = services.create_vhost()
    database = f"bench_{uuid.uuid4().hex[:8]}"
    os.environ.update(POSTROOM_MONGODB_URL=url, POSTROOM_MONGODB_DATABASE=database, POSTROOM_AMQP_URL=amqp,
                      POSTROOM_SECRET_KEY=uuid.uuid4().hex, POSTROOM_DATA_DIR=str(run_dir / "data"))
    try:
        key = make_tenant(url, database)
        rows = asyncio.run(measure_steps(url, database, key, args.calls))
    finally:
        store.terminate()
        store.wait(timeout=10)
        services.delete_vhost(vhost)
    print(f"{'step':32} {'wall ms':>8} {'front CPU ms':>13} {'store CPU ms':>13}")
    for name, wall, own, store_cpu in rows:
        print(f"{name:32} {wall:8.2f} {own:13.2f} {store_cpu:13.2f}")
    print(f"{'total':32} {sum(r[1] for r in rows):8.2f} {sum(r[2] for r in rows):13.2f} "
          f"{sum(r[3] for r in rows):13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
