"""Turns between the suite's parallel test processes (pytest-xdist) for tests that measure
time: a test marked `quiet` runs while no other test of the run does, so what it measures
is Postroom under its own load, not under the rest of the suite's.

Every other test holds a shared lock for its whole run (setup, call, teardown); a quiet
test holds it exclusively. Readers first pass a turnstile that a waiting quiet test holds,
so the stream of short tests in the other processes cannot starve it (flock alone lets
new shared holders in ahead of a waiting exclusive one). Without xdist there is nobody
to wait for and no lock is taken."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
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


@contextlib.contextmanager
def turn(quiet: bool) -> Iterator[None]:
    """Hold the run's lock while a test runs: alone when `quiet`, beside the others if not."""
    directory = _lock_dir()
    if directory is None:
        yield
        return
    turnstile, room = directory / "turnstile", directory / "room"
    if quiet:
        with _flock(turnstile, fcntl.LOCK_EX), _flock(room, fcntl.LOCK_EX):
            yield
        return
    with _flock(turnstile, fcntl.LOCK_EX):
        pass  # only to wait behind a quiet test that is waiting for the room
    with _flock(room, fcntl.LOCK_SH):
        yield
