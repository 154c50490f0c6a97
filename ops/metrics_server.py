"""Prometheus scrape endpoints for the processes that are not Dramatiq workers.

- the front (`POSTROOM_FRONT_METRICS_PORT`) and `postroom up`: request counts and
  latency, and in `up` the delivery metrics of its in-process worker;
- the scheduler (`POSTROOM_SCHEDULER_METRICS_PORT`): its lag, the backlogs and the open
  automation runs, measured each pass.

A worker pool's metrics are served by Dramatiq's own exposition server (see ops/cli.py's
`worker`). Each endpoint is prometheus_client's HTTP server on POSTROOM_METRICS_HOST
(default 127.0.0.1); a port of 0 turns it off."""

from __future__ import annotations

import logging

from prometheus_client import start_http_server
from pymongo.asynchronous.database import AsyncDatabase

from actors.metrics import AUTOMATION_RUNS, BACKLOG, SCHEDULER_LAG
from mongo.operations import backlogs, oldest_waiting, open_automation_runs
from pipelines.core.settings import Settings

log = logging.getLogger("postroom.metrics")


def serve(port: int, host: str) -> None:
    if not port:
        return
    start_http_server(port, addr=host)
    log.info("metrics on http://%s:%d/metrics", host, port)


async def measure_scheduler_lag(db: AsyncDatabase, settings: Settings) -> int:
    """Scheduler job: the age of the oldest due, unpromoted item as a gauge (0 when none)."""
    oldest = await oldest_waiting(db)
    ages = [item["age_seconds"] for key, item in oldest.items() if key.startswith("due_") and item]
    SCHEDULER_LAG.set(max([0.0, *ages]))
    return 0


async def measure_backlogs(db: AsyncDatabase, settings: Settings) -> int:
    """Scheduler job: each backlog (webhook deliveries due, outbox events unread, automation
    runs due) as a gauge labelled by its name."""
    for name, count in (await backlogs(db)).items():
        BACKLOG.labels(name).set(count)
    return 0


async def measure_automation_runs(db: AsyncDatabase, settings: Settings) -> int:
    """Scheduler job: the automation runs active now and, of those, waiting, as a gauge
    labelled by that state."""
    for state, count in (await open_automation_runs(db)).items():
        AUTOMATION_RUNS.labels(state).set(count)
    return 0
