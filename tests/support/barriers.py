"""Barriers for "nothing (more) happened" checks: wait for a later event that must come
after whatever we are checking did not happen, instead of sleeping for a guessed time.

- `scheduler_passes(service, n)`: `n` more scheduler passes finished (the scheduler counts
  its passes in the store, mongo/processes.py). With n ≥ 2 at least one whole pass ran
  after the call, so anything an EVERY_PASS job (ops/scheduler.py) would do has been done
  by then; the upkeep jobs (TIDY) run every TIDY_EVERY_PASSES-th pass: n = that + 1.
- `mail_barrier(service)`: a sentinel email, sent now from a workspace of its own, has
  reached the SMTP sink. It orders because every job the checked action published is
  already on the render or send queue: the sentinel's render job goes on the same FIFO
  queue after it, its send job after that, and it still needs a whole render, send and
  SMTP round of its own. (With worker threads the order is that of the jobs' starts: an
  earlier job would have to stall longer than the sentinel's whole trip to finish later.)
- `queue_consumers(amqp_url, queue, n)`: RabbitMQ reports `n` consumers on a queue (a
  worker process that has connected and is consuming)."""

from __future__ import annotations

import uuid

import pika

from mongo import processes
from tests.support.polling import wait_until


def scheduler_passes(service, n: int = 2, timeout: float = 30.0) -> None:
    start = service.store.run(processes.passes, "scheduler")
    wait_until(lambda: service.store.run(processes.passes, "scheduler") >= start + n, timeout,
               f"{n} more scheduler passes")


def mail_barrier(service, timeout: float = 30.0) -> None:
    """Sent from a workspace of its own, so the tenant under test is charged nothing."""
    tenant = getattr(service, "_barrier_tenant", None) or service.tenant("barrier")
    service._barrier_tenant = tenant
    to = f"barrier-{uuid.uuid4().hex[:10]}@barrier.example"
    response = tenant.post("/email/send", json={"to": to, "subject": "barrier", "text": "barrier"})
    assert response.status_code == 202, response.text
    service.smtp.wait_for(to, timeout=timeout)


def queue_consumers(amqp_url: str, queue: str, n: int, timeout: float = 30.0) -> None:
    def consumers():
        connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
        try:
            return connection.channel().queue_declare(queue, passive=True).method.consumer_count >= n
        finally:
            connection.close()
    wait_until(consumers, timeout, f"{n} consumers on {queue}", interval=0.2)
