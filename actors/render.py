"""The `render` queue: a shell over pipelines/workflows/render_chunk.py (queued messages →
personalised, signed MIME, handed to the `send` actor inside its job), rendering off the
event loop in this worker's process pool (render_pool.py)."""

from __future__ import annotations

import dramatiq

from pipelines.workflows.render_chunk import render_chunk

from . import runtime
from .render_pool import render_off_loop


@dramatiq.actor(queue_name="render", max_retries=10, min_backoff=1000, max_backoff=60_000)
async def render_messages(message_ids: list[str]) -> None:
    await render_chunk(runtime.store(), runtime.settings(), runtime.publisher(), render_off_loop, message_ids)
