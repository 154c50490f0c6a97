"""The `send` queue: a shell over pipelines/workflows/send_chunk.py (rendered MIME → SMTP
under the shared limits; claims, leases, retries and why they are safe are explained
there), timing each SMTP transaction and counting the outcomes for this worker's metrics."""

from __future__ import annotations

import dramatiq

from pipelines.workflows.send_chunk import send_chunk

from . import metrics, runtime
from .retries import job_options


class _Timed:
    """The worker's transport, each SMTP transaction timed (metrics.SMTP_SECONDS)."""

    def __init__(self, transport):
        self._transport = transport

    async def send(self, *args, **kwargs):
        with metrics.SMTP_SECONDS.time():
            return await self._transport.send(*args, **kwargs)


def timed_transport() -> _Timed:
    return _Timed(runtime.transport())


@dramatiq.actor(**job_options("send"))
async def send_messages(rendered: list[dict], claim_token: str = "", born: list[str] = ()) -> None:
    sent = await send_chunk(runtime.store(), runtime.settings(), runtime.publisher(), timed_transport(),
                            rendered, claim_token, born)
    metrics.count_send_outcomes(sent.finished, sent.deferred, sent.held)
