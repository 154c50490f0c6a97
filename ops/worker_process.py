"""One worker process of a `postroom worker` pool (ops/worker_pool.py starts it): a
Dramatiq worker for the named queues until SIGTERM/SIGINT, or until its pool is gone.

    python -m ops.worker_process --queues send,render --threads 8
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

import dramatiq

from actors import gc_tuning
from pipelines.adapters.smtp_client import announce_ehlo
from pipelines.core.settings import Settings

from . import logs

# A stopping worker lets the jobs in hand finish this long (an SMTP transaction is at most
# POSTROOM_SMTP_TIMEOUT_SECONDS); what is left is redelivered by RabbitMQ.
SHUTDOWN_SECONDS = 60
# How often the process checks that its pool is still there.
PARENT_CHECK_SECONDS = 1.0

log = logging.getLogger("postroom.worker")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ops.worker_process")
    parser.add_argument("--queues", required=True, help="comma-separated queue names")
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args(argv)
    logs.configure(log_format=Settings.from_env().log_format)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    pool_pid = os.getppid()


    from . import worker_boot  # local import: importing it boots the worker (settings, broker, actors)
    broker = worker_boot.broker
    broker.emit_after("process_boot")
    worker = dramatiq.Worker(broker, queues=set(args.queues.split(",")), worker_threads=args.threads)
    worker.start()
    gc_tuning.settle()
    log.info("worker process %d consuming %s with %d threads", os.getpid(), args.queues, args.threads)
    announce_ehlo(worker_boot.settings)  # a warning now, not at the first send, when no public name is set
    # A pool killed with SIGKILL cannot stop its children: each notices and stops itself.
    while not stop.wait(PARENT_CHECK_SECONDS):
        if os.getppid() != pool_pid:
            log.warning("worker process %d: its pool is gone; stopping", os.getpid())
            break
    worker.stop(timeout=SHUTDOWN_SECONDS * 1000)
    broker.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
