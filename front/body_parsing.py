"""Large JSON bodies are parsed and validated in processes of their own, so the front's
event loop keeps answering every other caller meanwhile.

A thread would not do: pydantic's JSON parser (and `json.loads`) keeps the GIL for the
whole document. Measured: a 30 MB body of 2.5 M keys held the loop 3.6 s in
`model_validate_json`, and as long when run in a thread (the loop never got a turn).
Small bodies, nearly all of them, are parsed in place: the hop to a process costs more
than they do."""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.process
import multiprocessing
import os
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# From this size on a body is parsed in a parser process: below it the worst JSON for the
# parser (tiny keys) costs under 10 ms of loop time.
OFF_LOOP_BYTES = 64 * 1024
# Parsing is bulk work for one caller: the parser processes yield the CPU to the serving
# process (a nice increment), whose loop answers everyone.
PARSER_NICENESS = 10
# Parser processes, started on the first large body. Each holds a large body's parse in
# memory (~10 times its size for many small values), so they are few; more large bodies
# at once wait their turn, off the loop.
PARSER_PROCESSES = 2


class BodyParsers:
    """The front's parser processes (spawned, never forked from the serving process and its
    threads), created on first use and shut down with the app."""

    def __init__(self, processes: int = PARSER_PROCESSES):
        self._processes = processes
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    async def run(self, size: int, parse: Callable[..., T], *args: Any) -> T:
        """`parse(*args)`: in place for a body under OFF_LOOP_BYTES, else in a parser process
        (`parse`, its arguments and its result or exception travel pickled)."""
        if size < OFF_LOOP_BYTES:
            return parse(*args)
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                self._processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=os.nice, initargs=(PARSER_NICENESS,))
        pool = self._pool
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, parse, *args)
        except concurrent.futures.process.BrokenProcessPool:
            # a parser process died (out of memory on a hostile body): this body fails (500);
            # the next large body gets fresh processes instead of the broken pool for ever
            if self._pool is pool:
                self._pool = None
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
