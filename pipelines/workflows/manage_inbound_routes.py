"""A workspace's inbound address (its token, made on first use) and its routes: create
(the signing secret sealed at rest, shown once), delete (what still waits in the route's
delivery lane is cancelled). docs/inbound.md."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import inbound_addresses, inbound_routes
from mongo import webhooks as webhook_store
from pipelines.core.documents import WebhookSubscription
from pipelines.core.errors import Forbidden
from pipelines.core.secret_box import seal
from pipelines.core.settings import Settings
from pipelines.inbound_routes.addresses import address_for, new_token
from pipelines.webhooks import signing

# Routes one workspace may have: matching reads them all for every message received.
MAX_ROUTES = 100


async def token(db: AsyncDatabase, workspace_id: str) -> str:
    """The workspace's inbound token, made on first use (two first uses at once keep one)."""
    found = await inbound_addresses.token_of(db, workspace_id)
    if found is None:
        await inbound_addresses.insert(db, workspace_id, new_token())
        found = await inbound_addresses.token_of(db, workspace_id)
    assert found is not None  # inserted above, or by the concurrent first use that won
    return found


async def address(db: AsyncDatabase, settings: Settings, workspace_id: str) -> dict:
    """The workspace's inbound address on the operator's domain, and an example with a tag."""
    mine = await token(db, workspace_id)
    return {"address": address_for(mine, settings.inbound_domain), "domain": settings.inbound_domain.lower(),
            "tagged_example": address_for(mine, settings.inbound_domain, "ticket-42")}


async def create_route(db: AsyncDatabase, settings: Settings, workspace_id: str, *, pattern: str, target_url: str,
                       priority: int, description: str | None) -> tuple[WebhookSubscription, str]:
    """The new route and its signing secret (403 `limit_reached` past MAX_ROUTES)."""
    if len(await inbound_routes.active_of(db, workspace_id)) >= MAX_ROUTES:
        raise Forbidden(f"A workspace has at most {MAX_ROUTES} inbound routes; delete one first.",
                        code="limit_reached")
    await token(db, workspace_id)
    secret = signing.new_secret()
    route = await inbound_routes.create(db, workspace_id, pattern=pattern.lower(), target_url=target_url,
                                        secret_sealed=seal(secret, settings.secret_key), priority=priority,
                                        description=description)
    return route, secret


async def rotate_secret(db: AsyncDatabase, settings: Settings, workspace_id: str,
                        route_id: str) -> tuple[WebhookSubscription | None, str]:
    """The route with a new signing secret, at once (retries of older events are signed with
    it too), and that secret; None when the workspace has no such active route."""
    secret = signing.new_secret()
    route = await webhook_store.replace_secret(db, workspace_id, route_id, seal(secret, settings.secret_key),
                                               collection="inbound_routes")
    return route, secret


async def delete_route(db: AsyncDatabase, workspace_id: str, route_id: str) -> bool:
    """False when the workspace has no such active route."""
    if not await inbound_routes.deactivate(db, workspace_id, route_id):
        return False
    await webhook_store.cancel_lane(db, route_id)
    return True
