"""The `webhooks` queue: turns of subscriptions' lanes, never one message per delivery. A
shell over pipelines/workflows/deliver_webhooks.py (what a turn does, and why lanes take
turns round robin), handing it this worker loop's kept-alive connections and counting
each attempt for this worker's metrics."""

from __future__ import annotations

import asyncio

import dramatiq

from pipelines.adapters import http_client as outbound_http
from pipelines.workflows.deliver_webhooks import take_turn

from . import metrics, runtime
from .retries import job_options

_sessions: dict[int, tuple[asyncio.AbstractEventLoop, outbound_http.Session]] = {}


def _session() -> outbound_http.Session:
    """The kept-alive connections of this worker's event loop, closed with its resources."""
    loop = asyncio.get_running_loop()
    held = _sessions.get(id(loop))
    if held is None or held[0] is not loop:
        held = _sessions[id(loop)] = (loop, outbound_http.Session())
        runtime.on_close(held[1].aclose)
    return held[1]


# Dramatiq's own retries cover only store or broker errors around a turn; the HTTP retry
# schedule is ours (pipelines/messages/retry_schedule.py) and never raises. A retried turn keeps
# its token, so it still holds its lane.
@dramatiq.actor(**job_options("webhooks"))
async def take_webhook_turn(webhook_id: str, token: str) -> None:
    await take_turn(runtime.store(), runtime.settings(), runtime.publisher(), _session(), webhook_id, token,
                    on_attempt=metrics.count_webhook_attempt)
