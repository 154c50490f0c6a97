"""The `bounces` queue: a shell over pipelines/workflows/bounce_reports.py (a stored
inbound report → parsed bounces/complaints, applied; ARF reports that are no complaint
counted in `postroom_feedback_reports_total`)."""

from __future__ import annotations

import dramatiq

from pipelines.workflows.bounce_reports import handle_report

from . import metrics, runtime
from .retries import job_options


@dramatiq.actor(**job_options("bounces"))
async def process_report(report_id: str) -> None:
    await handle_report(runtime.store(), report_id, on_feedback=metrics.count_feedback_report)
