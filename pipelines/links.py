"""Signed links put into emails: unsubscribe, preferences, open pixel, click redirect.

A token is `base64url(json payload).base64url(HMAC-SHA256(purpose, payload)[:16])`,
keyed with POSTROOM_SECRET_KEY: not guessable, not forgeable, and bound to its purpose
(an open-pixel token does not unsubscribe anybody). Payload keys are short because they
travel in every link: `w` workspace id, `c` contact id (or null), `e` email, `m` message
id, `u` the original URL of a click link. A message to several addresses carries links
with `c` and `e` null, bound to the message alone, so no recipient's link names another."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

MAC_BYTES = 16
# `form`: a subscription form's token; `form_confirm`: a double opt-in confirmation link.
PURPOSES = ("unsubscribe", "preferences", "open", "click", "form", "form_confirm")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(purpose: str, body: bytes, secret_key: str) -> bytes:
    return hmac.new(secret_key.encode(), purpose.encode() + b"\x00" + body, hashlib.sha256).digest()[:MAC_BYTES]


def sign(purpose: str, payload: dict, secret_key: str) -> str:
    if purpose not in PURPOSES:
        raise ValueError(f"unknown link purpose {purpose!r}")
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    return f"{_b64(body)}.{_b64(_mac(purpose, body, secret_key))}"


def verify(purpose: str, token: str, secret_key: str) -> dict | None:
    """The payload if the token is intact and meant for `purpose`; otherwise None."""
    try:
        body_part, mac_part = token.split(".", 1)
        body = _unb64(body_part)
        if not hmac.compare_digest(_unb64(mac_part), _mac(purpose, body, secret_key)):
            return None
        payload = json.loads(body)
    except (ValueError, TypeError):
        return None
    return payload if isinstance(payload, dict) else None


def recipient_payload(workspace_id: str, contact_id: str | None, email: str | None, message_id: str | None) -> dict:
    """`email` None (and `contact_id` None): the link belongs to a message with several
    recipients and names none of them; its page asks which address it is for."""
    return {"w": workspace_id, "c": contact_id, "e": email, "m": message_id}


def names_message_only(payload: dict) -> bool:
    """A multi-recipient message's link: bound to the message, not to one address."""
    return not payload.get("e") and not payload.get("c") and bool(payload.get("m"))


# URL layout of the recipient-facing routes (served by front/routes/pages.py).
def unsubscribe_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/u/{token}"


def preferences_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/p/{token}"


def open_pixel_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/t/o/{token}.gif"


def click_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/t/c/{token}"


def form_url(base_url: str, form_id: str) -> str:
    """A form's hosted page (GET) and where any website posts submissions (POST)."""
    return f"{base_url.rstrip('/')}/f/{form_id}"


def form_confirm_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/f/confirm/{token}"
