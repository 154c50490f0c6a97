"""Webhook payloads and their signatures (API spec §6).

The body is serialised once, when a delivery is created, and those exact bytes are both
signed and sent on every attempt: a receiver that recomputes the HMAC over the raw body
it received always agrees. Only the signature's timestamp changes between attempts.

    X-Service-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>

The HMAC key is the secret string exactly as shown to the user (`whsec_…`, UTF-8)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from pipelines.core import json_text

SECRET_PREFIX = "whsec_"
# A receiver should refuse signatures older (or newer) than this; the helper in
# docs/webhooks.md ("Verifying a delivery") does.
TOLERANCE_SECONDS = 300


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def encode_payload(event: str, timestamp: str, data: dict) -> str:
    """The delivery body: `{event, timestamp, data}` as compact JSON (UTF-8 kept as is)."""
    return json_text.compact({"event": event, "timestamp": timestamp, "data": data})


def sign(secret: str, body: str | bytes, timestamp: int) -> str:
    raw = body.encode() if isinstance(body, str) else body
    message = str(timestamp).encode() + b"." + raw
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secret: str, body: str | bytes, timestamp: int) -> str:
    return f"t={timestamp},v1={sign(secret, body, timestamp)}"


def delivery_headers(*, secret: str, body: str | bytes, timestamp: int, event: str,
                     delivery_id: str, webhook_id: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": "Postroom-Webhooks/1",
        "X-Service-Signature": signature_header(secret, body, timestamp),
        "X-Service-Event": event,
        "X-Service-Delivery-Id": delivery_id,
        "X-Service-Webhook-Id": webhook_id,
    }


def parse_signature_header(header: str) -> tuple[int, list[str]] | None:
    """`t=…,v1=…` → (t, [v1, …]); None when malformed."""
    timestamp, hashes = None, []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1" and value:
            hashes.append(value)
    if timestamp is None or not hashes:
        return None
    return timestamp, hashes


def verify(secret: str, header: str, body: bytes, now: float,
           tolerance_seconds: int = TOLERANCE_SECONDS) -> bool:
    parsed = parse_signature_header(header)
    if parsed is None:
        return False
    timestamp, hashes = parsed
    if abs(now - timestamp) > tolerance_seconds:
        return False
    expected = sign(secret, body, timestamp)
    return any(hmac.compare_digest(expected, candidate) for candidate in hashes)
