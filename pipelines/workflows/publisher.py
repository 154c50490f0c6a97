"""What a workflow may put on the broker, as one interface (implemented once, by
`actors/jobs.BrokerPublisher`), so a use case names the work it hands on and never an
actor, a queue or a transport."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from pipelines.core.errors import ServerError, one_line

log = logging.getLogger("postroom.publish")


class PublishFailed(Exception):
    """Some jobs could not be published: `unpublished` names what they carried (the ids
    of every job from the first one the broker did not take), `cause` says why,
    `reason` in a line (never the message it carried); `refused`: the broker answered
    and said no (a nack, a channel closed over the message), as against the broker
    being unreachable; `queue`: the queue it was for."""

    def __init__(self, unpublished: list, cause: BaseException, *, refused: bool = False,
                 reason: str | None = None, queue: str = "?"):
        super().__init__(f"{len(unpublished)} item(s) not handed to the broker: "
                         f"{type(cause).__name__}: {cause}")
        self.unpublished, self.cause = unpublished, cause
        self.refused, self.reason = refused, reason or f"{type(cause).__name__}: {cause}"
        self.queue = queue


def not_queued(error: BaseException, failure_code: str) -> ServerError:
    """What the API answers when work could not be published: 500 `failure_code`, whose
    `unpublished` names the items whose jobs were not published. Logged in one line with
    only the queue and the reason (the jobs may carry addresses or content)."""
    if isinstance(error, PublishFailed):
        log.warning("enqueue to %s failed: %s", error.queue, error.reason)
    else:
        log.warning("enqueue failed: %s", one_line(error))
    failed = ServerError("The work could not be queued; nothing was sent. Retry with backoff.", code=failure_code)
    failed.unpublished = error.unpublished if isinstance(error, PublishFailed) else []
    return failed


class Publisher(Protocol):
    """Every method raises PublishFailed for what the broker did not take."""

    async def render(self, message_ids: Sequence[str], *, born: str = "") -> None:
        """Render (then send) these queued messages, in chunks: render_chunk.py, run by
        the `render` actor (actors/render.py). `born`: the born claim they were stored
        under (delivery_status.born_claim), which their jobs hold."""

    async def render_parts(self, part_ids: Sequence[str], *, token: str) -> None:
        """Render, send and record these campaign parts (mongo/campaign_parts), a job
        each: render_chunk.render_part, run by the `render` actor. `token`: the born
        claim the parts were stored under, which their jobs hold."""

    async def send(self, rendered: list[dict], *, delay_ms: int = 0, born: Sequence[str] = ()) -> None:
        """Send rendered messages (jobs bounded by count and bytes), after `delay_ms`:
        send_chunk.py, run by the `send` actor (actors/send.py). `born`: born claims the
        jobs hold, handed on by a render job."""

    async def fan_out(self, campaign_id: str, batch: int) -> None:
        """Fan-out batch number `batch` of a sending campaign: its parts stored and
        handed to render jobs."""

    async def cancel_campaign(self, campaign_id: str) -> None:
        """Cancel every message of a cancelled campaign not yet handed to SMTP."""

    async def webhook_turns(self, turns: Sequence[tuple[str, str]]) -> None:
        """A turn of each webhook lane `(subscription id, lane token)` (actors/webhooks.py)."""

    async def process_report(self, report_id: str) -> None:
        """Parse and apply a stored inbound report (bounce or complaint)."""

    async def receive_inbound(self, message_id: str) -> None:
        """Authenticate, parse, route and hand on a message received at an inbound address."""

    async def advance_runs(self, run_ids: Sequence[str]) -> None:
        """Advance these automation runs, in chunks."""

    async def import_contacts(self, job_id: str) -> None:
        """Run a stored contact import job."""
