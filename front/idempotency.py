"""The Idempotency-Key header for the endpoints the spec names (§7)."""

from __future__ import annotations

import functools
import hashlib
import json

from quart import request

from mongo import idempotency as store
from pipelines.errors import Conflict, ValidationFailed

from .runtime import caller, db, settings

MAX_KEY_LENGTH = 255
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
            try:
                result = await view(*args, **kwargs)
            except Exception as error:
                status = getattr(error, "status", 500)
                if status >= 500:
                    await store.release(db(), workspace_id, key)
                else:
                    from pipelines.errors import PostroomError
                    body = error.envelope() if isinstance(error, PostroomError) else {"error": {}}
                    await store.complete(db(), workspace_id, key, {"status": status, "body": body})
                raise
            body, status = result[0], result[1]
            await store.complete(db(), workspace_id, key, {"status": status, "body": body})
            return body, status, {"X-Idempotency-Status": "new"}
        setattr(wrapper, IDEMPOTENCY_ATTRIBUTE, "required" if required else "optional")
        return wrapper
    return decorate
