"""100,000 contacts through `postroom import contacts` against a fresh embedded store, side
by side with its baseline in the same run: a bare pymongo `insert_many` of the same contact
documents (the documents the import stores for those rows: mongo/contacts.new_document,
the store prepared with mongo.indexes.prepare_store, so the same indexes) into another
fresh embedded store, in ordered commands of 1,000. The baseline runs before and after the
import and the ratio is taken against their mean (the box's load moves during a run).

Printed: rows/s of each, the ratio and its bar (issue #34: the import ≥ 0.5× the bare
inserts), the CPU split per process (store, client) of each, then a second import of the
same file (the all-updates case: every address taken, nothing changes) and an export.

    /work/main/.venv/bin/python -m bench.contact_import [ROWS]
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.stack import cpu_of, print_cpu
from ops import embedded_store

BAR = 0.5
INSERT_COMMAND_DOCS = 1000


def write_csv(path: Path, rows: int) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write("email,first_name,last_name,plan,score,vip\n")
        for n in range(rows):
            vip = "true" if n % 2 else "false"
            out.write(f"person{n}@example.com,Pérson{n},Nämé,plan{n % 5},{n % 100},{vip}\n")


def bare_insert_many(path: Path, rows: int) -> tuple[float, dict[str, float]]:
    """(seconds, CPU split) of inserting the file's contact documents, built beforehand,
    with bare `insert_many` into a fresh prepared store."""
    from mongo import contacts
    from mongo.client import connect
    from mongo.indexes import prepare_store
    from pipelines.audience.contact_csv import read_rows

    with open(path, encoding="utf-8-sig", newline="") as handle:
        docs = [contacts.new_document("bench", email=r.email, first_name=r.fields.get("first_name"),
                                      last_name=r.fields.get("last_name"), attributes=r.attributes)
                for r in read_rows(handle)[1]]
    assert len(docs) == rows
    with tempfile.TemporaryDirectory(prefix="postroom-bench-bare-", dir="/tmp") as tmp:
        process, url = embedded_store.start(Path(tmp))
        try:
            async def go() -> tuple[float, dict[str, float]]:
                client, db = connect(url, "bench")
                await prepare_store(db)
                store_before, client_before = cpu_of({"store": [process.pid]}), time.process_time()
                started = time.monotonic()
                for start in range(0, len(docs), INSERT_COMMAND_DOCS):
                    await db.contacts.insert_many(docs[start:start + INSERT_COMMAND_DOCS], ordered=True)
                seconds = time.monotonic() - started
                used = {"store": cpu_of({"store": [process.pid]})["store"] - store_before["store"],
                        "client": time.process_time() - client_before}
                await client.close()
                return seconds, used
            return asyncio.run(go())
        finally:
            process.terminate()
            process.wait()


def run_import(cli: list[str], env: dict, path: Path, workspace: str, store_pid: int) -> tuple[float, dict, dict]:
    """(seconds, summary, CPU split) of one `postroom import contacts` of the file."""
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    store_before = cpu_of({"store": [store_pid]})["store"]
    started = time.monotonic()
    result = subprocess.run([*cli, "import", "contacts", str(path), "--workspace", workspace, "--json"],
                            env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = {"store": cpu_of({"store": [store_pid]})["store"] - store_before,
            "import command": (children.ru_utime + children.ru_stime)
            - (children_before.ru_utime + children_before.ru_stime)}
    if result.returncode != 0:
        raise RuntimeError(f"import failed ({result.returncode}): {result.stderr[-2000:]}")
    return seconds, json.loads(result.stdout), used


def main(rows: int = 100_000) -> None:
    with tempfile.TemporaryDirectory(prefix="postroom-bench-import-", dir="/tmp") as tmp:
        env = {**os.environ, "POSTROOM_DATA_DIR": tmp, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        env.pop("POSTROOM_MONGODB_URL", None)
        cli = [sys.executable, "-m", "ops.cli"]
        path = Path(tmp) / "contacts.csv"
        write_csv(path, rows)

        bare_before, bare_cpu = bare_insert_many(path, rows)
        print(f"bare insert_many (before): {rows} rows in {bare_before:.1f} s ({rows / bare_before:,.0f} rows/s)",
              flush=True)
        print_cpu("bare insert_many (before)", bare_cpu, bare_before)

        try:
            workspace = json.loads(subprocess.run([*cli, "workspace", "create", "bench", "--json"], env=env,
                                                  check=True, capture_output=True, text=True).stdout)["id"]
            subprocess.run([*cli, "indexes"], env=env, check=True, capture_output=True)  # as a front or worker would
            store_pid = json.loads((Path(tmp) / "store.json").read_text())["pid"]
            results = {}
            for label in ("import", "re-import"):
                seconds, summary, used = run_import(cli, env, path, workspace, store_pid)
                results[label] = seconds
                print(f"{label}: {rows} rows in {seconds:.1f} s ({rows / seconds:,.0f} rows/s) "
                      f"created={summary['created']} updated={summary['updated']} unchanged={summary['unchanged']} "
                      f"duplicates={summary['duplicates']} errors={summary['error_count']}", flush=True)
                print_cpu(label, used, seconds)

            bare_after, bare_cpu = bare_insert_many(path, rows)
            print(f"bare insert_many (after): {rows} rows in {bare_after:.1f} s ({rows / bare_after:,.0f} rows/s)",
                  flush=True)
            print_cpu("bare insert_many (after)", bare_cpu, bare_after)
            bare_rate = rows / ((bare_before + bare_after) / 2)
            ratio = (rows / results["import"]) / bare_rate
            print(f"import {rows / results['import']:,.0f} rows/s against bare insert_many {bare_rate:,.0f} rows/s: "
                  f"ratio {ratio:.2f} (bar ≥ {BAR}: {'met' if ratio >= BAR else 'NOT met'}); load average "
                  f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)

            subprocess.run([*cli, "export", "contacts", "--workspace", workspace], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            started = time.monotonic()
            subprocess.run([*cli, "export", "contacts", "--workspace", workspace], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(f"export: {rows} rows in {time.monotonic() - started:.1f} s", flush=True)
        finally:
            embedded_store.stop_recorded(Path(tmp))  # the detached store the first command started


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
