"""The `render` queue: a shell over pipelines/workflows/render_chunk.py (queued messages →
personalised, signed MIME), rendering off the event loop in this worker's process pool
(render_pool.py). A worker that also serves `send` delivers what it rendered itself (its
outcomes counted as the `send` actor counts them); one that does not hands the MIME to
the `send` actor inside its job."""

from __future__ import annotations

import dramatiq

from pipelines.workflows.render_chunk import render_chunk, render_part

from . import metrics, runtime
from .render_pool import render_off_loop
from .retries import job_options
from .send import timed_transport


@dramatiq.actor(**job_options("render"))
async def render_messages(message_ids: list[str], claim_token: str = "", born: list[str] = ()) -> None:
    transport = timed_transport() if runtime.serves("send") else None
    sent = await render_chunk(runtime.store(), runtime.settings(), runtime.publisher(), render_off_loop, message_ids,
                              transport=transport, claim_token=claim_token, born=born)
    _count(sent)


@dramatiq.actor(**job_options("render"))
async def render_campaign_part(part_id: str, claim_token: str) -> None:
    transport = timed_transport() if runtime.serves("send") else None
    _count(await render_part(runtime.store(), runtime.settings(), runtime.publisher(), render_off_loop, part_id,
                             claim_token, transport=transport))


def _count(sent) -> None:
    if sent is not None:
        metrics.count_send_outcomes(sent.finished, sent.deferred, sent.held)
