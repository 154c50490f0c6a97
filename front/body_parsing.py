"""Large JSON bodies are parsed and validated in processes of their own, so the front's
event loop keeps answering every other caller meanwhile.

A thread would not do: pydantic's JSON parser (and `json.loads`) keeps the GIL for the
whole document. Measured: a 30 MB body of 2.5 M keys held the loop 3.6 s in
`model_validate_json`, and as long when run in a thread (the loop never got a turn).
Small bodies, nearly all of them, are parsed in place: the hop to a process costs more
than they do.

A large body travels to its parser through a private file, not pickled down the pool's
pipe: pickling copies it in one call that keeps the GIL (54 ms of CPU for 30 MB, a stall
of every caller on the loop), while `os.write` in a thread copies it with the GIL released."""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.process
import dataclasses
import multiprocessing
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# From this size on a body is parsed in a parser process: below it the worst JSON for the
# parser (tiny keys) costs under 10 ms of loop time.
OFF_LOOP_BYTES = 64 * 1024
# Parsing is bulk work for one caller: the parser processes yield the CPU to the serving
# process (the largest nice increment: they run on what CPU the serving loop leaves), whose
# loop answers everyone.
PARSER_NICENESS = 19
# Parser processes, started on the first large body. Each holds a large body's parse in
# memory (~10 times its size for many small values), so they are few; more large bodies
# at once wait their turn, off the loop.
PARSER_PROCESSES = 2
# Memory-backed where the system has it. A body's file (0600) is read once, then removed.
_SPILL_DIRECTORY = "/dev/shm" if os.path.isdir("/dev/shm") else None


@dataclasses.dataclass(frozen=True)
class _Spilled:
    """A large bytes argument, kept in a file for its trip to a parser process."""
    path: str


def _spill(data: bytes) -> _Spilled:
    descriptor, path = tempfile.mkstemp(prefix="postroom-body-", dir=_SPILL_DIRECTORY)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view):]
    finally:
        os.close(descriptor)
    return _Spilled(path)


def _ready() -> None:
    """A task that only has a parser process start (and import what parsing needs)."""


def _start_niced(pool: concurrent.futures.ProcessPoolExecutor, processes: int) -> None:
    """Run in the niced spawner thread: each submit finding no idle process starts one, here,
    so it inherits this thread's nice value (Linux keeps one a thread, and a child takes the
    value of the thread that forked it)."""
    for _ in range(processes):
        pool.submit(_ready)


def _parse_spilled(parse: Callable[..., T], *args: Any) -> T:
    """In the parser process: `parse` with each spilled argument read back."""
    return parse(*(Path(a.path).read_bytes() if isinstance(a, _Spilled) else a for a in args))


class BodyParsers:
    """The front's parser processes (spawned, never forked from the serving process and its
    threads), created on first use and shut down with the app."""

    def __init__(self, processes: int = PARSER_PROCESSES):
        self._processes = processes
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        # the thread that starts the parser processes: niced itself, so they are from their
        # first instruction (a process importing the app at full priority took the CPU from
        # the serving loop: /health waited 100-190 ms while they started)
        self._spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="body-parser-spawner",
                                                              initializer=os.nice, initargs=(PARSER_NICENESS,))

    async def run(self, size: int, parse: Callable[..., T], *args: Any) -> T:
        """`parse(*args)`: in place for a body under OFF_LOOP_BYTES, else in a parser process
        (`parse`, its arguments and its result or exception travel pickled, but for a large
        bytes argument, which travels in a file)."""
        if size < OFF_LOOP_BYTES:
            return parse(*args)
        loop = asyncio.get_running_loop()
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                self._processes, mp_context=multiprocessing.get_context("spawn"))
            await loop.run_in_executor(self._spawner, _start_niced, self._pool, self._processes)
        pool = self._pool
        spilled: list[Any] = []
        try:
            for argument in args:
                large = isinstance(argument, bytes) and len(argument) >= OFF_LOOP_BYTES
                spilled.append(await asyncio.to_thread(_spill, argument)
                               if large else argument)
            return await loop.run_in_executor(pool, _parse_spilled, parse, *spilled)
        except concurrent.futures.process.BrokenProcessPool:
            # a parser process died (out of memory on a hostile body): this body fails (500);
            # the next large body gets fresh processes instead of the broken pool for ever
            if self._pool is pool:
                self._pool = None
            raise
        finally:
            for argument in spilled:
                if isinstance(argument, _Spilled):
                    os.unlink(argument.path)

    def close(self) -> None:
        self._spawner.shutdown(wait=False)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
