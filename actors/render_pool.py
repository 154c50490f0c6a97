"""Rendering off the worker's event loop.

Rendering (merge tags, MIME, DKIM) is CPU-bound; the loop that runs it also sends mail,
delivers webhooks and applies bounces for every workspace. So `render_all` runs in a pool
of worker processes (POSTROOM_RENDER_PROCESSES; 0 runs it in a thread instead), a slice of
SLICE_MESSAGES messages at a time: a job waits for its slice before it queues the next,
so jobs take turns in the pool's queue and a light job waits behind at most one slice of
each heavy one, each slice bounded by the render budget (pipelines/templates/render_budget.py).

Processes, not threads: a thread shares the GIL, and every I/O step of the loop waits for
the rendering thread to let go of it (bench/render_offload measures both). The pool is
started with `spawn` (forking a process that runs threads and an event loop is unsafe)
as the worker boots (StartRenderPool), so the first job does not wait for it, or on first
use elsewhere, and lives as long as the worker. If a pool process dies, the pool is
replaced and the job raises, so Dramatiq retries it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import os
import threading
import time
from concurrent.futures.process import BrokenProcessPool

import dramatiq

from pipelines.templates.render_message import RenderContext, RenderResult, render_all

from . import gc_tuning, runtime

SLICE_MESSAGES = 20
PARENT_CHECK_SECONDS = 1.0

_pool: concurrent.futures.ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def _exit_with(parent: int) -> None:
    """Runs first in each pool process: end it when the worker is gone (a killed worker
    (SIGKILL) cannot stop its pool, and an idle pool process would wait for work forever);
    and settle its garbage collector, as every long-running process of ours does (what
    rendering needs is imported by now: this module imports it)."""
    gc_tuning.settle()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(0)
    threading.Thread(target=watch, name="exit-with-worker", daemon=True).start()


def _executor(processes: int) -> concurrent.futures.ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=_exit_with, initargs=(os.getpid(),))
        return _pool


def _ready() -> None:
    """A task that only makes a pool process import what rendering needs."""


class StartRenderPool(dramatiq.Middleware):
    """Starts the render processes as the worker boots and stops them as it shuts down."""

    def after_worker_boot(self, broker, worker) -> None:
        # whether a render job may deliver what it rendered itself (workflows/render_chunk.py)
        runtime.serve_queues(getattr(worker, "consumer_whitelist", None))
        processes = runtime.settings().render_processes
        if processes > 0:
            pool = _executor(processes)
            for _ in range(processes):   # each submit finding no idle process starts one
                pool.submit(_ready)

    def after_worker_shutdown(self, broker, worker) -> None:
        # after Dramatiq has joined the jobs in hand: a stop lets them finish their renders
        global _pool
        with _pool_lock:
            pool, _pool = _pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _discard(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    global _pool
    with _pool_lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False, cancel_futures=True)


async def _render_slice(messages: list[dict], ctx: RenderContext, processes: int) -> RenderResult:
    if processes <= 0:
        return await asyncio.to_thread(render_all, messages, ctx)
    pool = _executor(processes)
    try:
        return await asyncio.get_running_loop().run_in_executor(pool, render_all, messages, ctx)
    except BrokenProcessPool:
        _discard(pool)
        raise


async def render_off_loop(messages: list[dict], ctx: RenderContext) -> RenderResult:
    """`render_all(messages, ctx)`, computed off the event loop, slice by slice."""
    processes = runtime.settings().render_processes
    result = RenderResult()
    for start in range(0, len(messages), SLICE_MESSAGES):
        sliced = await _render_slice(messages[start:start + SLICE_MESSAGES], ctx, processes)
        result.rendered.extend(sliced.rendered)
        result.failed.update(sliced.failed)
    return result
