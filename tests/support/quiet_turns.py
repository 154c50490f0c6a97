"""Turns between the suite's parallel test processes (pytest-xdist) for tests that measure
time: a test marked `quiet` runs while no other test of the run does, so what it measures
is Postroom under its own load, not under the rest of the suite's.

Every other test holds a shared lock for its whole run (setup, call, teardown); a quiet
test holds it exclusively. Readers first pass a turnstile that a waiting quiet test holds,
so the stream of short tests in the other processes cannot starve it (flock alone lets
new shared holders in ahead of a waiting exclusive one). Without xdist there is nobody
to wait for and no lock is taken.

Holding the room is not enough on its own: what an earlier test set going in the other
processes' long-lived stacks (a campaign still sending, retries coming due) goes on while
they wait for their next turn. A quiet test therefore also waits, once it has the room,
until the machine's CPUs are mostly idle (measured from /proc/stat), up to a bound."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def _lock_dir() -> Path | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every process of one run
    if not run:
        return None
    path = Path(tempfile.gettempdir()) / f"postroom-quiet-{run}"
    path.mkdir(exist_ok=True)
    return path


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, mode)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


# A quiet test starts once the CPUs were at most this busy over two windows in a row
# (idle here, a session's stacks use ~5%), or after SETTLE_SECONDS whatever the load.
SETTLE_BUSY_FRACTION = 0.25
SETTLE_WINDOW_SECONDS = 0.5
SETTLE_SECONDS = 90


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


last_settle: dict[str, float] = {}  # the last settle's figures, for a quiet test to print


def settle() -> float:
    """Wait until the CPUs are mostly idle (see SETTLE_BUSY_FRACTION); the last window's
    busy fraction, for the record."""
    started = time.monotonic()
    deadline = time.monotonic() + SETTLE_SECONDS
    quiet_windows, busy_fraction = 0, 1.0
    while quiet_windows < 2 and time.monotonic() < deadline:
        busy_before, total_before = _cpu_times()
        time.sleep(SETTLE_WINDOW_SECONDS)
        busy_after, total_after = _cpu_times()
        busy_fraction = (busy_after - busy_before) / max(1, total_after - total_before)
        quiet_windows = quiet_windows + 1 if busy_fraction <= SETTLE_BUSY_FRACTION else 0
    last_settle.update(busy_fraction=busy_fraction, waited_seconds=time.monotonic() - started)
    return busy_fraction


@contextlib.contextmanager
def turn(quiet: bool) -> Iterator[None]:
    """Hold the run's lock while a test runs: alone when `quiet`, beside the others if not."""
    directory = _lock_dir()
    if directory is None:
        if quiet:
            settle()
        yield
        return
    turnstile, room = directory / "turnstile", directory / "room"
    if quiet:
        with _flock(turnstile, fcntl.LOCK_EX), _flock(room, fcntl.LOCK_EX):
            settle()
            yield
        return
    with _flock(turnstile, fcntl.LOCK_EX):
        pass  # only to wait behind a quiet test that is waiting for the room
    with _flock(room, fcntl.LOCK_SH):
        yield
