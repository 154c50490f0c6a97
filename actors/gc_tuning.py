"""The garbage collector, set for each long-running process of ours once it has started
(the front, every worker process, every render process)."""

from __future__ import annotations

import gc

# Young objects are collected every this many allocations (Python's default: 700).
YOUNG_THRESHOLD = 20_000


def settle() -> None:
    """Call once start-up is done. What is loaded by then (modules, the app and its
    routes, the broker's actors) lives as long as the process, so it is moved out of the
    collector's sight (`gc.freeze`); and young objects are collected every 20,000
    allocations instead of 700. A request or a job makes thousands of short-lived objects:
    with the defaults the collector ran several times per request, and now and then walked
    every object the process holds, a pause that every request in flight waited out."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, 20, 20)
