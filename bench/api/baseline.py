"""bench/api's baseline: the least a send endpoint can do. Quart + pydantic validating the
same request body with the same field types, then one job published through Dramatiq to
RabbitMQ with publisher confirms (its own queue, nobody consumes it), served by Hypercorn
as `postroom front` serves ours (its garbage collector settled alike, actors/gc_tuning.py).
No key, no store, no limits.

    python -m bench.api.baseline PORT AMQP_URL"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Annotated, Literal

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from hypercorn.asyncio import serve
from pydantic import Field, StringConstraints, ValidationError
from quart import Quart, request

from actors import event_loop, gc_tuning
from front.types import DisplayName, EmailAddress, JsonObject, Strict
from ops.serve import _hypercorn_config

QUEUE = "bench_api_baseline"


class SendBody(Strict):
    to: EmailAddress | Annotated[list[EmailAddress], Field(min_length=1, max_length=50)]
    subject: Annotated[str, StringConstraints(min_length=1, max_length=998)]
    html: str | None = None
    text: str | None = None
    template_id: str | None = None
    template_data: JsonObject(256 * 1024) | None = None
    from_email: EmailAddress | None = None
    from_name: DisplayName | None = None
    reply_to: EmailAddress | None = None
    track_opens: bool = False
    track_clicks: bool = False
    stream: Literal["transactional", "marketing"] = "transactional"
    footer: bool = True


def make_app(amqp_url: str) -> Quart:
    dramatiq.set_broker(RabbitmqBroker(url=amqp_url, confirm_delivery=True))

    @dramatiq.actor(queue_name=QUEUE)
    def deliver(message_id: str, body: dict) -> None:  # never consumed: the bench purges its queue
        pass

    app = Quart("baseline")

    @app.get("/api/v1/health")
    async def health():
        return {"ok": True}

    @app.post("/api/v1/email/send")
    async def send():
        try:
            data = SendBody.model_validate_json(await request.get_data(), strict=True)
        except ValidationError as error:
            return {"error": {"message": str(error.errors()[0]["msg"])}}, 400
        message_id = uuid.uuid4().hex
        # pika blocks on the confirm: off the event loop, as any async app must.
        await asyncio.to_thread(deliver.send, message_id, data.model_dump())
        return {"data": {"message_id": message_id, "status": "queued"}}, 202

    return app


def main() -> None:
    port, amqp_url = int(sys.argv[1]), sys.argv[2]
    app = make_app(amqp_url)
    gc_tuning.settle()  # as `postroom front` settles its collector after start-up
    event_loop.run(serve(app, _hypercorn_config("127.0.0.1", port)))  # served as ours is


if __name__ == "__main__":
    main()
