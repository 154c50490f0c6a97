"""100,000 contacts through `postroom import contacts` against a fresh embedded store:
the wall time of the command (a second run is the all-updates case) and the rows/s.

    /work/main/.venv/bin/python -m bench.contact_import [ROWS]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(rows: int = 100_000) -> None:
    with tempfile.TemporaryDirectory(prefix="postroom-bench-import-") as tmp:
        env = {**os.environ, "POSTROOM_DATA_DIR": tmp, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        env.pop("POSTROOM_MONGODB_URL", None)
        cli = [sys.executable, "-m", "ops.cli"]
        workspace = json.loads(subprocess.run([*cli, "workspace", "create", "bench", "--json"], env=env,
                                              check=True, capture_output=True, text=True).stdout)["id"]
        path = Path(tmp) / "contacts.csv"
        with open(path, "w", encoding="utf-8") as out:
            out.write("email,first_name,last_name,plan,score,vip\n")
            for n in range(rows):
                vip = "true" if n % 2 else "false"
                out.write(f"person{n}@example.com,Pérson{n},Nämé,plan{n % 5},{n % 100},{vip}\n")
        for label in ("insert", "update"):
            started = time.monotonic()
            result = subprocess.run([*cli, "import", "contacts", str(path), "--workspace", workspace, "--json"],
                                    env=env, capture_output=True, text=True)
            seconds = time.monotonic() - started
            summary = json.loads(result.stdout)
            print(f"{label}: {rows} rows in {seconds:.1f} s ({rows / seconds:,.0f} rows/s) "
                  f"created={summary['created']} updated={summary['updated']} unchanged={summary['unchanged']} "
                  f"errors={summary['error_count']}", flush=True)
        subprocess.run([*cli, "export", "contacts", "--workspace", workspace], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.monotonic()
        subprocess.run([*cli, "export", "contacts", "--workspace", workspace], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"export: {rows} rows in {time.monotonic() - started:.1f} s", flush=True)
        from ops import embedded_store
        embedded_store.stop_recorded(Path(tmp))  # the detached store the first command started


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
