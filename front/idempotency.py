"""The Idempotency-Key header for the endpoints the spec names (§7)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import time

from pymongo.errors import PyMongoError
from quart import current_app, g, request

from mongo import idempotency as store
from pipelines.core.errors import Conflict, PostroomError, ValidationFailed

from .runtime import caller, db, settings

MAX_KEY_LENGTH = 255
# While the store is away, a failed request's claim is released again this often.
RELEASE_RETRY_SECONDS = 1.0
# Set on every view wrapped by `idempotent`: "required" or "optional". The OpenAPI document
# reads it, so the documented Idempotency-Key header follows the decorator.
IDEMPOTENCY_ATTRIBUTE = "_postroom_idempotency_key"


def _fingerprint(raw: bytes) -> str:
    """Same body means same JSON value: key order and white space do not matter."""
    try:
        canonical = json.dumps(json.loads(raw or b"null"), sort_keys=True, separators=(",", ":"))
        material = canonical.encode()
    except ValueError:
        material = raw
    return hashlib.sha256(request.method.encode() + b" " + request.path.encode() + b"\n" + material).hexdigest()


def request_seed() -> str | None:
    """The seed of this request's Idempotency-Key claim (None without a key). What the
    request creates is named from it (pipelines/workflows/accept_email.py), so every attempt under one key
    names it alike, and a retry after an unknown outcome finds the first attempt's
    messages instead of creating second copies (mongo/idempotency.claim)."""
    return g.get("idempotency_seed")


async def _release(workspace_id: str, key: str, claim: str, *, keep_seed: bool) -> None:
    """Free the key for a retry. The store is often why the request failed: when it does
    not answer, keep trying in the background, so a retry need not wait out the claim's
    lease (it gets 409 conflict, "retry shortly", meanwhile)."""
    try:
        await store.release(db(), workspace_id, key, claim, keep_seed=keep_seed)
    except PyMongoError:
        current_app.add_background_task(_release_later, workspace_id, key, claim, keep_seed)


async def _release_later(workspace_id: str, key: str, claim: str, keep_seed: bool) -> None:
    deadline = time.monotonic() + store.IN_PROGRESS_LEASE_SECONDS
    while time.monotonic() < deadline:
        await asyncio.sleep(RELEASE_RETRY_SECONDS)
        try:
            await store.release(db(), workspace_id, key, claim, keep_seed=keep_seed)
            return
        except PyMongoError:
            continue


def idempotent(required: bool = False):
    def decorate(view):
        @functools.wraps(view)
        async def wrapper(*args, **kwargs):
            key = request.headers.get("Idempotency-Key")
            if key is None or key == "":
                if required:
                    raise ValidationFailed("The Idempotency-Key header is required for this endpoint.",
                                           path="Idempotency-Key")
                return await view(*args, **kwargs)
            if len(key) > MAX_KEY_LENGTH:
                raise ValidationFailed(f"Idempotency-Key is longer than {MAX_KEY_LENGTH} characters.",
                                       path="Idempotency-Key")
            raw = await request.get_data(as_text=False)
            fingerprint = _fingerprint(raw)
            workspace_id = caller().workspace_id
            outcome, record = await store.claim(db(), workspace_id, key, fingerprint,
                                                settings().idempotency_ttl_seconds)
            if outcome == "existing":
                if record["fingerprint"] != fingerprint:
                    raise Conflict("This Idempotency-Key was used with a different request body.",
                                   code="idempotency_conflict")
                if record["state"] != "done":
                    raise Conflict("A request with this Idempotency-Key is still in progress; retry shortly.")
                cached = record["response"]
                return cached["body"], cached["status"], {"X-Idempotency-Status": "cached"}
            g.idempotency_seed = record["seed"]
            try:
                result = await view(*args, **kwargs)
            except Exception as error:
                status = getattr(error, "status", 500)
                if status >= 500:
                    await _release(workspace_id, key, record["claim"],
                                   keep_seed=getattr(error, "outcome_unknown", False))
                else:
                    body = error.envelope() if isinstance(error, PostroomError) else {"error": {}}
                    await store.complete(db(), workspace_id, key, {"status": status, "body": body})
                raise
            body, status = result[0], result[1]
            try:
                await store.complete(db(), workspace_id, key, {"status": status, "body": body})
            except PyMongoError:
                # The work is done; only its record is not. A retry executes again with the
                # same seed, finds what this one created, and answers the same.
                await _release(workspace_id, key, record["claim"], keep_seed=True)
            return body, status, {"X-Idempotency-Status": "new"}
        setattr(wrapper, IDEMPOTENCY_ATTRIBUTE, "required" if required else "optional")
        return wrapper
    return decorate
