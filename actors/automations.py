"""The `automations` queue: a shell over pipelines/workflows/advance_automation_runs.py
(runs moved forward step by step; how each step is made safe to repeat is explained there),
handed this worker's store, settings, publisher and outbound HTTP, and counting what each
job did to runs for this worker's metrics."""

from __future__ import annotations

import dramatiq

from pipelines.adapters import http_client
from pipelines.automations.run_counts import RunCounts
from pipelines.workflows.advance_automation_runs import advance_runs as advance_automation_runs

from . import metrics, runtime
from .retries import job_options

# Runs per job: the runs of a job at one step move together, so its email step makes one
# render job of up to 100 messages (actors/publish.RENDER_CHUNK), as a campaign part does.
ADVANCE_CHUNK = 100


@dramatiq.actor(**job_options("automations"))
async def advance_runs(run_ids: list[str]) -> None:
    counts = RunCounts()
    try:
        await advance_automation_runs(runtime.store(), runtime.settings(), runtime.publisher(), http_client.request,
                                      run_ids, counts)
    finally:  # a job that raises keeps the moves that landed before: they count
        metrics.count_automation_runs(counts)
