"""The `bounces` queue: a shell over pipelines/workflows/bounce_reports.py (a stored
inbound report → parsed bounces/complaints, applied; ARF reports that are no complaint
counted in `postroom_feedback_reports_total`)."""

from __future__ import annotations

import dramatiq

from pipelines.workflows.bounce_reports import handle_report

from . import metrics, runtime


@dramatiq.actor(queue_name="bounces", max_retries=10, min_backoff=1000, max_backoff=60_000)
async def process_report(report_id: str) -> None:
    await handle_report(runtime.store(), report_id, on_feedback=metrics.count_feedback_report)
