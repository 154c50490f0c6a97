"""The `inbound` queue: a shell over pipelines/workflows/receive_inbound.py (a message
received at a workspace's inbound address → authenticated, parsed, routed, its
`email.received` event handed to the route's lane and the outbox)."""

from __future__ import annotations

import dramatiq

from pipelines.adapters.dns_client import DnsPythonResolver
from pipelines.workflows.receive_inbound import process

from . import runtime
from .retries import job_options


@dramatiq.actor(**job_options("inbound"))
async def receive_inbound(message_id: str) -> None:
    resolver = DnsPythonResolver(runtime.settings().dns_resolver)
    await process(runtime.store(), runtime.publisher(), resolver, message_id)
