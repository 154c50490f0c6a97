"""Every actor of the service, listed, and the one publisher that enqueues them.

`ACTORS` is what a worker serves and what `actors.broker.setup` binds to the process's
broker; `BrokerPublisher` is the `pipelines.workflows.publisher.Publisher` the front,
the actors and the scheduler hand to the workflows (reached through
`actors.runtime.publisher()`)."""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.core.settings import Settings
from pipelines.messages import send_jobs

from .automations import ADVANCE_CHUNK, advance_runs
from .bounces import process_report
from .campaigns import cancel_campaign_messages, fan_out_campaign
from .imports import import_contacts
from .inbound import receive_inbound
from .publish import publish, publish_chunks, publish_coalesced, publish_jobs
from .render import render_campaign_part, render_messages
from .send import send_messages
from .webhooks import take_webhook_turn

ACTORS = (fan_out_campaign, cancel_campaign_messages, render_messages, render_campaign_part, send_messages,
          process_report, take_webhook_turn, advance_runs, import_contacts, receive_inbound)


class BrokerPublisher:
    def __init__(self, settings: Settings):
        self._settings = settings

    async def render(self, message_ids: Sequence[str], *, born: str = "") -> None:
        """Each job with its own claim token, as send jobs (a render job may deliver),
        and the born claims of the ids it carries; ids handed in by concurrent callers
        while a render publish is in flight share the next one's jobs
        (actors/publish.publish_coalesced)."""
        if message_ids:
            await publish_coalesced(render_messages, message_ids, tag=born,
                                    more=lambda tags: (send_jobs.new_claim_token(), sorted(set(tags) - {""})))

    async def render_parts(self, part_ids: Sequence[str], *, token: str) -> None:
        """One job a part, holding the part's born claim `token`."""
        await publish_jobs(render_campaign_part, [(part_id, token) for part_id in part_ids])

    async def send(self, rendered: list[dict], *, delay_ms: int = 0, born: Sequence[str] = ()) -> None:
        """Each job with its own claim token (a retry of the job keeps it)."""
        jobs = send_jobs.chunks(rendered, max_bytes=self._settings.send_job_max_bytes)
        await publish_jobs(send_messages, [(chunk, send_jobs.new_claim_token(), list(born)) for chunk in jobs],
                           delay_ms=delay_ms, carried=lambda args: [r["_id"] for r in args[0]])

    async def fan_out(self, campaign_id: str, batch: int) -> None:
        await publish(fan_out_campaign, campaign_id, batch)

    async def cancel_campaign(self, campaign_id: str) -> None:
        await publish(cancel_campaign_messages, campaign_id)

    async def webhook_turns(self, turns: Sequence[tuple[str, str]]) -> None:
        """One job per `(subscription id, lane token)`: a turn of that lane."""
        await publish_jobs(take_webhook_turn, list(turns))

    async def process_report(self, report_id: str) -> None:
        await publish(process_report, report_id)

    async def receive_inbound(self, message_id: str) -> None:
        await publish(receive_inbound, message_id)

    async def advance_runs(self, run_ids: Sequence[str]) -> None:
        await publish_chunks(advance_runs, run_ids, size=ADVANCE_CHUNK)

    async def import_contacts(self, job_id: str) -> None:
        await publish(import_contacts, job_id)
