"""`postroom worker`: a pool of worker processes kept at strength.

Dramatiq's own command ends its whole pool when one child dies (on purpose, to leave
restarts to a process manager); so a child killed by the OOM killer, a crash or a stray
`kill -9` would stop every queue the pool serves. Here the pool is a small supervisor:
it starts N children (ops/worker_process.py), starts another in place of any that dies
(RabbitMQ redelivers the jobs the dead one had not finished), and on SIGTERM/SIGINT stops
them all gracefully. Children that keep dying are restarted with a growing delay, so a
broken deployment does not spin.

Run the pool itself under a process manager (systemd: ops/systemd/) so the supervisor is
restarted too."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time

log = logging.getLogger("postroom.worker")

# Delay before replacing a dead child: doubles while children die young, up to the maximum.
RESTART_DELAY_SECONDS = 0.5
MAX_RESTART_DELAY_SECONDS = 30.0
# A child that ran this long died of something else than a broken start: restart at once.
HEALTHY_AFTER_SECONDS = 30.0
# How long children get to stop on SIGTERM (they finish jobs in hand) before SIGKILL.
STOP_GRACE_SECONDS = 70.0
POLL_SECONDS = 0.2


class Child:
    def __init__(self, slot: int, command: list[str], env: dict[str, str]):
        self.slot = slot
        self.command = command
        self.env = env
        self.process: subprocess.Popen | None = None
        self.started_at = 0.0
        self.restart_delay = RESTART_DELAY_SECONDS
        self.restart_at = 0.0  # when a dead child may be started again

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, env=self.env, stdin=subprocess.DEVNULL)
        self.started_at = time.monotonic()
        log.info("worker child %d started (pid %d)", self.slot, self.process.pid)

    def reap(self) -> bool:
        """True when the child has just been found dead (and its restart scheduled)."""
        if self.process is None or self.process.poll() is None:
            return False
        code = self.process.returncode
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        lived = time.monotonic() - self.started_at
        if lived >= HEALTHY_AFTER_SECONDS:
            self.restart_delay = RESTART_DELAY_SECONDS
        log.warning("worker child %d (pid %d) died (%s) after %.0f s; starting another in %.1f s",
                    self.slot, self.process.pid, how, lived, self.restart_delay)
        self.restart_at = time.monotonic() + self.restart_delay
        self.restart_delay = min(self.restart_delay * 2, MAX_RESTART_DELAY_SECONDS)
        self.process = None
        return True


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def with_render_default(env: dict[str, str], processes: int, cores: int) -> dict[str, str]:
    """Unless POSTROOM_RENDER_PROCESSES is set: no render processes (render in a thread of
    each worker) when the worker processes alone take every core. A render process pays
    for itself only with a core to run on; without one it adds the pickling of every
    message's MIME between processes and their context switches (bench.send on 2 cores,
    `-p 2`: workers 1.26 ms of CPU a message with 2 render processes each, 1.16 ms with
    none; 0.48 → 0.50 of a bare SMTP client)."""
    if "POSTROOM_RENDER_PROCESSES" in env or processes < cores:
        return env
    return {**env, "POSTROOM_RENDER_PROCESSES": "0"}


def run(queues: list[str], processes: int, threads: int, env: dict[str, str]) -> int:
    command = [sys.executable, "-m", "ops.worker_process", "--queues", ",".join(queues),
               "--threads", str(threads)]
    env = with_render_default(env, processes, usable_cores())
    children = [Child(slot, command, env) for slot in range(1, processes + 1)]
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info("worker pool: %d process(es) x %d threads on %s", processes, threads, ",".join(queues))
    _serve_metrics(env)
    while not stop.is_set():
        now = time.monotonic()
        for child in children:
            child.reap()
            if child.process is None and now >= child.restart_at:
                child.start()
        stop.wait(POLL_SECONDS)
    _stop_all(children)
    return 0


def _serve_metrics(env: dict[str, str]) -> None:
    """With a metrics port (ops/cli.py `_worker_metrics_env`): Dramatiq's exposition server,
    which the `dramatiq` command would fork, runs here in the pool, serving what every child
    writes to the shared multiprocess directory."""
    if not env.get("dramatiq_prom_port"):
        return
    for name in ("dramatiq_prom_host", "dramatiq_prom_port", "dramatiq_prom_db", "PROMETHEUS_MULTIPROC_DIR"):
        os.environ[name] = env[name]  # the middleware module reads them when imported
    from dramatiq.middleware import prometheus  # local import: it reads the dramatiq_prom_* set just above
    threading.Thread(target=prometheus._run_exposition_server, name="metrics", daemon=True).start()


def _stop_all(children: list[Child]) -> None:
    running = [c.process for c in children if c.process is not None and c.process.poll() is None]
    log.info("worker pool stopping %d process(es)", len(running))
    for process in running:
        process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for process in running:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("worker process %d did not stop in %.0f s; killing it", process.pid, STOP_GRACE_SECONDS)
            process.kill()
            process.wait()
