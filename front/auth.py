"""Bearer authentication, permission checks and rate limits for every /api/v1 request.

Which permission an endpoint needs follows from its blueprint (named after its area)
and its method: GET/HEAD need `<area>:read`, everything else `<area>:write`."""

from __future__ import annotations

import datetime as dt
import time

from pymongo.errors import PyMongoError
from quart import Quart, g, request

from mongo import api_keys as key_store
from mongo import rate_windows
from mongo import workspaces as workspace_store
from pipelines import api_keys
from pipelines.clock import iso
from pipelines.errors import Forbidden, NotFound, RateLimited, Unauthorized, ValidationFailed

from .lookup import found
from .runtime import Caller, db, settings

# Blueprints under /api/v1 that answer without a key.
PUBLIC_ENDPOINTS = {"health.health"}
# Email sends (POSTs of this blueprint) also count their emails in the per-key email window.
EMAIL_ENDPOINT_PREFIX = "email."


async def authenticate() -> Caller:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        raise Unauthorized("Missing Authorization header; send 'Authorization: Bearer <API key>'.")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("Malformed Authorization header; expected 'Bearer <API key>'.")
    token = token.strip()
    if not api_keys.looks_like_key(token):
        raise Unauthorized("Invalid API key.")
    # Both kept by this process for a couple of seconds (mongo/recent.py): a revoked key
    # is refused by every front within that bound.
    key = await key_store.recent_by_key(db(), token)
    if key is None:
        raise Unauthorized("Invalid API key.")
    if key.get("revoked"):
        raise Unauthorized("This API key has been revoked.")
    workspace = await found(workspace_store.recent(db(), key["workspace_id"]),
                            "The workspace of this API key was not found.", code="workspace_not_found")
    return Caller(key=key, workspace=workspace)


def needed_permission() -> str | None:
    area = request.blueprint
    if area not in api_keys.AREAS:
        return None
    mode = "read" if request.method in ("GET", "HEAD") else "write"
    return f"{area}:{mode}"


async def _hit_window(caller: Caller, window: str, limit: int, now: float, *, state_attr: str,
                      message: str, code: str, cost: int = 1) -> None:
    """Count `cost` in one sliding window; its state feeds the response headers."""
    state = await rate_windows.hit(db(), window, caller.key_id, limit=limit, now=now, cost=cost)
    setattr(g, state_attr, state)
    if not state.allowed:
        raise RateLimited(message, retry_after=state.retry_after_seconds(now), code=code)


async def check_rate(caller: Caller) -> None:
    now = time.time()
    general_limit = caller.key.get("rate_limit") or settings().rate_limit_per_minute
    await _hit_window(caller, "req", general_limit, now, state_attr="rate_state",
                      message=f"Rate limit of {general_limit} requests per minute exceeded.",
                      code="rate_limited")


async def count_emails(caller: Caller, emails: int) -> None:
    """The email window counts emails, not requests: a send of N messages costs N, all or
    nothing (429 rate_limit_exceeded with Retry-After when they do not fit now; 400 when
    N alone is more than the key may ever send in a window). Called by the email views
    once the request is valid; `give_back_emails` returns the units if nothing is sent."""
    limit = caller.key.get("email_rate_limit") or settings().email_rate_limit_per_minute
    if emails > limit:
        raise ValidationFailed(f"messages: {emails} emails are more than this key may send in a minute "
                               f"({limit}); split them into batches of at most {limit}.", path="messages")
    await _hit_window(caller, "email", limit, time.time(), state_attr="email_rate_state", cost=emails,
                      message=f"Email rate limit of {limit} emails per minute exceeded: {emails} more do not "
                              "fit in the current window.",
                      code="rate_limit_exceeded")


async def give_back_emails(emails: int) -> None:
    """Best effort: with the store away the caller's own error is the answer, not this."""
    state = g.get("email_rate_state")
    if state is not None:
        try:
            await rate_windows.give_back(db(), state, emails)
        except PyMongoError:
            pass


def register(app: Quart) -> None:
    @app.before_request
    async def _guard():
        if not request.path.startswith("/api/v1/") or request.endpoint in PUBLIC_ENDPOINTS:
            return None
        try:
            caller = await authenticate()
        except (Unauthorized, NotFound):
            if request.routing_exception is not None:
                return None  # unknown route or method: 404/405 whoever asks (the routes are public)
            raise
        g.caller = caller
        await check_rate(caller)
        permission = needed_permission()
        if permission and not api_keys.grants(caller.key.get("permissions") or [], permission):
            raise Forbidden(f"This API key lacks the '{permission}' permission.")
        return None

    @app.after_request
    async def _rate_headers(response):
        for prefix, attr in (("X-RateLimit", "rate_state"), ("X-EmailRateLimit", "email_rate_state")):
            state = g.get(attr)
            if state is not None:
                response.headers[f"{prefix}-Limit"] = str(state.limit)
                response.headers[f"{prefix}-Remaining"] = str(state.remaining)
                response.headers[f"{prefix}-Reset"] = iso_from_epoch(state.reset_epoch)
        return response


def iso_from_epoch(epoch: float) -> str:
    return iso(dt.datetime.fromtimestamp(epoch, dt.timezone.utc))
