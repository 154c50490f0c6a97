"""Delivery metrics, with prometheus_client: messages by outcome and destination domain
class, SMTP transaction latency, throttle holds, webhook attempts, automation runs and steps,
scheduler lag, backlogs.

A `postroom worker` starts its processes with PROMETHEUS_MULTIPROC_DIR set (ops/cli.py),
so these values are written to that directory by every forked process and Dramatiq's
exposition server (its Prometheus middleware, on POSTROOM_WORKER_METRICS_PORT) serves
them beside its own. The front, the scheduler and `postroom up` serve their own process's
registry (ops/metrics_server.py)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from pipelines.automations.run_counts import RunCounts
from pipelines.messages.destination_class import domain_class

MESSAGES = Counter("postroom_messages_total",
                   "Messages by delivery outcome (delivered, deferred, bounced, failed) and destination domain class",
                   ["outcome", "domain_class"])
SMTP_SECONDS = Histogram("postroom_smtp_transaction_seconds", "One SMTP transaction, from MAIL FROM to the answer",
                         buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
THROTTLE_HOLDS = Counter("postroom_throttle_holds_total", "Messages held back by a throttle (key, plan or domain)")
WEBHOOK_ATTEMPTS = Counter("postroom_webhook_attempts_total",
                           "Webhook delivery attempts by result (delivered, retry, failed for good)", ["result"])
FEEDBACK_REPORTS = Counter("postroom_feedback_reports_total",
                           "ARF reports that are no complaint, by Feedback-Type (auth-failure, virus, not-spam, other)",
                           ["feedback_type"])
SCHEDULER_LAG = Gauge("postroom_scheduler_lag_seconds",
                      "Age of the oldest item due and not yet promoted (scheduled email, webhook delivery)",
                      multiprocess_mode="max")
BACKLOG = Gauge("postroom_backlog",
                "Work waiting now, counted up to 10,000 (mongo/operations.backlogs): webhook deliveries due, "
                "outbox events not yet read by the webhook fan-out or by automations, automation runs due",
                ["backlog"], multiprocess_mode="max")

AUTOMATION_RUNS_STARTED = Counter("postroom_automation_runs_started_total",
                                  "Automation runs started (their first step taken), whatever started them")
AUTOMATION_RUNS_ENDED = Counter("postroom_automation_runs_ended_total",
                                "Automation runs ended, by status (completed, failed, cancelled)", ["status"])
AUTOMATION_STEPS = Counter("postroom_automation_steps_total",
                           "Automation steps taken (each move of a run written), by step type", ["step_type"])
AUTOMATION_RUNS = Gauge("postroom_automation_runs",
                        "Automation runs now, counted up to 10,000 (mongo/operations.open_automation_runs): "
                        "active (neither ended nor paused), and of those waiting (a delay, an event, a webhook retry)",
                        ["state"], multiprocess_mode="max")


def _class_of(message: dict) -> str:
    to = message.get("to") or []
    return domain_class(to[0] if isinstance(to, list) and to else str(to))


def count_send_outcomes(finished: list[tuple[dict, str]], deferred: list[dict], held: int) -> None:
    for message, outcome in finished:
        MESSAGES.labels(outcome, _class_of(message)).inc()
    for message in deferred:
        MESSAGES.labels("deferred", _class_of(message)).inc()
    if held:
        THROTTLE_HOLDS.inc(held)


def count_webhook_attempt(status: str) -> None:
    """`status` the delivery's after the attempt: delivered, pending (a retry follows) or failed."""
    WEBHOOK_ATTEMPTS.labels({"pending": "retry"}.get(status, status)).inc()


def count_feedback_report(feedback_type: str) -> None:
    # the type comes from outside: a label only for RFC 5965/6591's own names
    known = ("abuse", "fraud", "virus", "not-spam", "auth-failure", "other")
    FEEDBACK_REPORTS.labels(feedback_type if feedback_type in known else "other").inc()


def count_automation_runs(counts: RunCounts) -> None:
    """What an engine job or the scheduler's event pass did to runs (pipelines/automations/run_counts.py)."""
    if counts.started:
        AUTOMATION_RUNS_STARTED.inc(counts.started)
    for step_type, taken in counts.steps.items():
        AUTOMATION_STEPS.labels(step_type).inc(taken)
    for status, ended in counts.ended.items():
        AUTOMATION_RUNS_ENDED.labels(status).inc(ended)
