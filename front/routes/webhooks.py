"""Webhook subscriptions (both forms of the spec), secret rotation, test deliveries and
the delivery log. Deliveries themselves are made by the `webhooks` actor from the outbox."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from quart import Blueprint

from mongo import webhooks as webhook_store
from pipelines import views
from pipelines.core.clock import now_iso
from pipelines.core.errors import ValidationFailed
from pipelines.core.ids import new_uuid
from pipelines.core.targets import MAX_URL_LENGTH, target_problem
from pipelines.webhooks import signing as webhook_signing
from pipelines.webhooks.events import EVENT_TYPES, TEST_EVENT
from pipelines.workflows import manage_webhooks
from pipelines.workflows.deliver_webhooks import send_signed

from ..lookup import found, no_such, owned
from ..pagination import PageQuery, page
from ..resource_routes import page_of
from ..responses import one
from ..runtime import caller, db, settings
from ..types import TARGET_URL_PATTERN, Id, Strict
from ..validation import body, query

bp = Blueprint("webhooks", __name__, url_prefix="/api/v1")

EventType = Annotated[Literal[EVENT_TYPES], Field(description="One of the event types of spec §6, or email.received.")]
TargetUrl = Annotated[str, StringConstraints(min_length=1, max_length=MAX_URL_LENGTH), Field(
    json_schema_extra={"pattern": TARGET_URL_PATTERN},
    description="http(s) URL receiving signed POST deliveries; at most 2048 characters. Read by the "
                "parser that sends: an unreadable URL, credentials, IPv4 not written as four decimal "
                "numbers, or a host that is not public (unless the operator allows it) is refused.")]


class CreateTrigger(Strict):
    targetUrl: TargetUrl  # noqa: N815 (the spec's field name)
    event: EventType


class CreateWebhook(Strict):
    """The second subscription form: one subscription for several events."""
    url: TargetUrl
    events: Annotated[list[EventType], Field(min_length=1, max_length=len(EVENT_TYPES), description=(
        "1 to 19 event types (the spec's 18 and email.received); repeats are ignored. One subscription "
        "(one id, one secret) for all."))]


class TriggerList(PageQuery):
    event: EventType | None = Field(None, description="Only subscriptions to this event.")


class TriggerId(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: Id = Field(description="The subscription to delete.")


class DeliveryList(PageQuery):
    status: Literal["pending", "delivered", "failed", "cancelled"] | None = None


def check_target(url: str, path: str) -> None:
    problem = target_problem(url, settings().allow_private_targets)
    if problem:
        raise ValidationFailed(f"{path} {problem}.", path=path)


async def subscribe(events: list[str], url: str, form: str):
    doc, secret = await manage_webhooks.subscribe(db(), settings(), caller().workspace_id, events=events,
                                                  target_url=url, form=form)
    return one({**views.subscription(doc), "secret": secret}, 201)


async def unsubscribe(webhook_id: str):
    await found(manage_webhooks.unsubscribe(db(), caller().workspace_id, webhook_id), no_such("webhook subscription"))
    return one({"success": True})


@bp.post("/webhooks/triggers")
@body(CreateTrigger)
async def create_trigger(data: CreateTrigger):
    """Subscribe `targetUrl` to one event. 201; the signing secret is in `secret`, shown only here."""
    check_target(data.targetUrl, "targetUrl")
    return await subscribe([data.event], data.targetUrl, "triggers")


@bp.get("/webhooks/triggers")
@query(TriggerList)
async def list_triggers(params: TriggerList):
    """The workspace's active subscriptions, newest first (secrets are never listed)."""
    return await page_of(webhook_store.list_active, params, event=params.event,
                         view=lambda d: views.subscription(d, params.event))


@bp.delete("/webhooks/triggers")
@query(TriggerId)
async def delete_trigger(params: TriggerId):
    """Delete the subscription `id`; its waiting deliveries are cancelled."""
    return await unsubscribe(params.id)


@bp.post("/webhooks")
@body(CreateWebhook)
async def create_webhook(data: CreateWebhook):
    """Second form: one subscription (one id, one secret) for several events. 201."""
    check_target(data.url, "url")
    return await subscribe(data.events, data.url, "webhooks")


@bp.get("/webhooks/<uuid:webhook_id>")
async def get_webhook(webhook_id: str):
    """One active subscription."""
    return one(views.subscription(await owned(webhook_store, webhook_id, "webhook subscription")))


@bp.delete("/webhooks/<uuid:webhook_id>")
async def delete_webhook(webhook_id: str):
    """Delete a subscription; its waiting deliveries are cancelled."""
    return await unsubscribe(webhook_id)


@bp.post("/webhooks/<uuid:webhook_id>/rotate-secret")
async def rotate_secret(webhook_id: str):
    """Replace the signing secret at once; the new one is returned only here."""
    doc, secret = await manage_webhooks.rotate_secret(db(), settings(), caller().workspace_id, webhook_id)
    await found(doc, no_such("webhook subscription"))
    return one({"id": doc["_id"], "secret": secret, "rotatedAt": doc["secret_rotated_at"]})


@bp.post("/webhooks/<uuid:webhook_id>/test")
async def test_webhook(webhook_id: str):
    """Send a signed `webhook.test` delivery now and report the receiver's answer
    (status_code 0 when nothing answered)."""
    doc = await owned(webhook_store, webhook_id, "webhook subscription")
    result = await send_signed(
        url=doc["target_url"], sealed_secret=doc["secret_sealed"], secret_key=settings().secret_key,
        body=webhook_signing.encode_payload(TEST_EVENT, now_iso(), {"webhook_id": doc["_id"], "test": True}),
        event=TEST_EVENT, delivery_id=f"test_{new_uuid()}", webhook_id=doc["_id"],
        allow_private=settings().allow_private_targets)
    return one({"success": result.ok, "status_code": result.status_code,
                "response_time_ms": result.duration_ms, "error": None if result.status_code else result.error})


@bp.get("/webhooks/<uuid:webhook_id>/deliveries")
@query(DeliveryList)
async def list_deliveries(webhook_id: str, params: DeliveryList):
    """The subscription's deliveries, newest first, each with every attempt."""
    await owned(webhook_store, webhook_id, "webhook subscription")
    docs, total = await webhook_store.list_for_webhook(db(), caller().workspace_id, webhook_id,
                                                       status=params.status, limit=params.limit,
                                                       offset=params.offset)
    attempts = await webhook_store.attempts_for(db(), [d["_id"] for d in docs])
    return page([views.delivery(d, attempts[d["_id"]]) for d in docs], total=total,
                limit=params.limit, offset=params.offset)
