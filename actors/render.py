"""The `render` queue: messages → personalised MIME, stored for the `send` actor."""

from __future__ import annotations

import dramatiq

from mongo import batches, messages
from pipelines.render_message import RenderContext, render_all

from . import runtime, signing

SANDBOX_DETAIL = "sandbox key: not sent (mock result)"


@dramatiq.actor(queue_name="render", max_retries=10, min_backoff=1000, max_backoff=60_000)
async def render_messages(message_ids: list[str]) -> None:
    db = runtime.store()
    docs = [m for m in await messages.load(db, message_ids) if m["status"] == "queued"]
    sandbox = [m["_id"] for m in docs if m.get("sandbox")]
    if sandbox:  # sandbox keys go through every step but SMTP and get a mock outcome
        await messages.advance(db, [(mid, "delivered", {"smtp_response": "250 sandbox"}, SANDBOX_DETAIL,
                                     ("sent",)) for mid in sandbox])
        await batches.record_finished(db, [(m, "delivered") for m in docs if m.get("sandbox")])
    real = [m for m in docs if not m.get("sandbox")]
    if not real:
        return
    signers = await signing.signers_for(db, runtime.settings(), real)
    result = render_all(real, RenderContext(settings=runtime.settings(), workspaces={}, signers=signers))
    await messages.save_rendered(db, result.rendered, result.failed)
    await batches.record_finished(db, [(m, "failed") for m in real if m["_id"] in result.failed])
    if result.ready_ids:
        from .send import send_messages
        send_messages.send(result.ready_ids)
