"""One retry policy per queue, in one table, and what happens to a job that fails for good.

Dramatiq's Retries middleware retries a job that raised with exponential backoff between
`min_backoff` and `max_backoff` (jittered), at most `max_retries` times. Every actor takes
its options from `job_options(queue)`, so a queue's policy is read here and nowhere else.

An error that retrying cannot mend (`PERMANENT_ERRORS`: the data or the request is wrong,
not the moment) ends the job at once (Dramatiq's `throws`): no retry, no backoff.
A job that fails for good — permanently, or with its retries spent — is:
- dead-lettered: RabbitMQ moves it to the queue's `<queue>.XQ` (visible in management,
  `postroom queues` shows its depth), where it stays for inspection, never run again;
- logged once at error with the queue, actor, message id and the error;
- counted in `postroom_jobs_failed_total{queue, reason}` (reason `permanent` or `exhausted`).
What it was working on is not left in limbo: each workflow records a final state for what
it cannot do (a message `failed` with its reason, a run `failed`, an import `failed`)
before raising a permanent error, and the scheduler's watchdog settles any message a job
exhausted its retries on (docs/guarantees.md)."""

from __future__ import annotations

import dataclasses
import logging

import dramatiq
from prometheus_client import Counter

from pipelines.core.errors import (
    Conflict,
    Forbidden,
    MissingFromEmail,
    NoContent,
    NotFound,
    PermanentJobError,
    ValidationFailed,
)

log = logging.getLogger("postroom.jobs")


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    max_retries: int
    min_backoff_ms: int
    max_backoff_ms: int


# queue → policy; why each is what it is: docs/operating.md, "Retries: one policy a queue".
# Backoff doubles from the minimum up to the maximum (Dramatiq's rule), jittered.
_STORE_BLIP = RetryPolicy(10, 1_000, 60_000)  # render, send, bounces: guarded by claims and guarded writes
RETRY_POLICY: dict[str, RetryPolicy] = {
    "render": _STORE_BLIP, "send": _STORE_BLIP, "bounces": _STORE_BLIP,
    "inbound": _STORE_BLIP,  # a guarded status write; the event's writes are idempotent
    "campaigns": RetryPolicy(20, 1_000, 30_000),  # idempotent fan-out must not stall on a short outage
    "automations": RetryPolicy(20, 1_000, 60_000),  # each step is a compare-and-set on the run
    "webhooks": RetryPolicy(5, 1_000, 30_000),  # deliveries keep their own schedule in the store
    "imports": RetryPolicy(3, 1_000, 30_000),  # claimed once; rows already written are idempotent
}

# The request or the data is wrong, not the moment: retrying cannot help.
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (
    PermanentJobError, ValidationFailed, NoContent, MissingFromEmail, NotFound, Forbidden, Conflict)

FAILED_JOBS = Counter("postroom_jobs_failed_total",
                      "Jobs that failed for good, by queue and reason (permanent error, retries exhausted)",
                      ["queue", "reason"])


def job_options(queue: str) -> dict:
    """The `@dramatiq.actor` options of an actor on `queue`: its queue and its retry policy."""
    policy = RETRY_POLICY[queue]
    return {"queue_name": queue, "max_retries": policy.max_retries, "min_backoff": policy.min_backoff_ms,
            "max_backoff": policy.max_backoff_ms, "throws": PERMANENT_ERRORS}


class ReportFailedJobs(dramatiq.Middleware):
    """Logs and counts a job once it has failed for good (after Retries decided it)."""

    def after_process_message(self, broker, message, *, result=None, exception=None):
        if exception is None or not message.failed:
            return
        reason = "permanent" if isinstance(exception, PERMANENT_ERRORS) else "exhausted"
        FAILED_JOBS.labels(message.queue_name, reason).inc()
        log.error("job failed for good (%s): queue=%s actor=%s message_id=%s error=%s: %s", reason,
                  message.queue_name, message.actor_name, message.message_id, type(exception).__name__, exception)
