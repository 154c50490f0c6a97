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
from pipelines.core import api_keys
from pipelines.core.clock import iso
from pipelines.core.errors import Forbidden, NotFound, RateLimited, Unauthorized, ValidationFailed

from .lookup import found
from .runtime import Caller, db, settings

# Blueprints under /api/v1 that answer without a key.
PUBLIC_ENDPOINTS = {"health.health"}
# Email sends (POSTs of this blueprint) also count their emails in the per-key email window.
EMAIL_ENDPOINT_PREFIX = "email."
# A single send is one email whatever its body says: its email window is counted with its
# request window, in one store write (mongo/rate_windows.hit_together), before the body is read.
SINGLE_SEND_ENDPOINT = "email.send"


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


def _request_limit(caller: Caller) -> int:
    return caller.key.get("rate_limit") or settings().rate_limit_per_minute


def _email_limit(caller: Caller) -> int:
    return caller.key.get("email_rate_limit") or settings().email_rate_limit_per_minute


async def _hit_windows(subject: str, charges: list[rate_windows.Charge]) -> None:
    """Count the charges in the windows of `subject` (a key's id), in order, up to the first
    that does not fit (rate_windows.hit_together); their states feed the response headers.
    429 naming the window that refused."""
    now = time.time()
    states = await rate_windows.hit_together(db(), subject, charges, now=now)
    g.rate_state = states.get("req", g.get("rate_state"))
    g.email_rate_state = states.get("email", g.get("email_rate_state"))
    for charge in charges:
        state = states[charge.scope]
        if not state.allowed:
            if charge.scope == "req":
                raise RateLimited(f"Rate limit of {charge.limit} requests per minute exceeded.",
                                  retry_after=state.retry_after_seconds(now), code="rate_limited")
            raise RateLimited(f"Email rate limit of {charge.limit} emails per minute exceeded: {charge.cost} more "
                              "do not fit in the current window.",
                              retry_after=state.retry_after_seconds(now), code="rate_limit_exceeded")


async def check_rate(caller: Caller) -> None:
    charges = [rate_windows.Charge("req", _request_limit(caller))]
    email_limit = _email_limit(caller)
    if request.endpoint == SINGLE_SEND_ENDPOINT and email_limit >= 1:
        charges.append(rate_windows.Charge("email", email_limit))
    await _hit_windows(caller.key_id, charges)
    g.emails_counted = len(charges) - 1


async def check_operator_rate(operator_id: str) -> None:
    """An operator's console requests, in a request window of their own at the default
    per-key limit (an operator has no key)."""
    await check_attempts(f"operator:{operator_id}", settings().rate_limit_per_minute)


async def check_attempts(subject: str, per_minute: int) -> None:
    """A request window of `subject`'s own (429 past `per_minute`)."""
    await _hit_windows(subject, [rate_windows.Charge("req", per_minute)])


async def count_emails(caller: Caller, emails: int) -> None:
    """The email window counts emails, not requests: a send of N messages costs N, all or
    nothing (429 rate_limit_exceeded with Retry-After when they do not fit now; 400 when
    N alone is more than the key may ever send in a window). Called by the email views
    once the request is valid; `give_back_emails` returns the units if nothing is sent.
    A single send's one email was counted with its request (`check_rate`)."""
    if g.get("emails_counted") == emails:
        g.emails_taken = True
        return
    limit = _email_limit(caller)
    if emails > limit:
        raise ValidationFailed(f"messages: {emails} emails are more than this key may send in a minute "
                               f"({limit}); split them into batches of at most {limit}.", path="messages")
    await _hit_windows(caller.key_id, [rate_windows.Charge("email", limit, emails)])


async def give_back_emails(emails: int) -> None:
    """Best effort: with the store away the caller's own error is the answer, not this."""
    state = g.get("email_rate_state")
    if state is not None:
        try:
            await rate_windows.give_back(db(), state, emails)
        except PyMongoError:
            pass


async def _return_unused_emails() -> None:
    """A single send counted in the email window that never came to sending (an invalid
    body, a missing permission, an Idempotency-Key replay): the email is given back and
    the answer carries no email-window headers, as when it was never counted."""
    if g.get("emails_counted") and not g.get("emails_taken"):
        await give_back_emails(g.emails_counted)
        g.email_rate_state = None


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
        await _return_unused_emails()
        for prefix, attr in (("X-RateLimit", "rate_state"), ("X-EmailRateLimit", "email_rate_state")):
            state = g.get(attr)
            if state is not None:
                response.headers[f"{prefix}-Limit"] = str(state.limit)
                response.headers[f"{prefix}-Remaining"] = str(state.remaining)
                response.headers[f"{prefix}-Reset"] = iso_from_epoch(state.reset_epoch)
        return response


def iso_from_epoch(epoch: float) -> str:
    return iso(dt.datetime.fromtimestamp(epoch, dt.UTC))
