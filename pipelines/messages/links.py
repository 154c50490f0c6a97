"""Sealed links put into emails: unsubscribe, preferences, open pixel, click redirect.

A token is `base64url(AES-SIV(json payload, associated data = purpose))` under a 512-bit
key derived from POSTROOM_SECRET_KEY: opaque (the address and ids inside cannot be read),
not forgeable (SIV's tag is a MAC over payload and purpose), and bound to its purpose (an
open-pixel token does not unsubscribe anybody). SIV is deterministic — the same link for
the same recipient — and adds only 16 bytes, so an unsubscribe link stays about 230 characters.
Payload keys are short because they travel in every link: `w` workspace id, `c` contact
id (or null), `e` email, `m` message id, `u` the original URL of a click link. A message
to several addresses carries links with `c` and `e` null, bound to the message alone, so
no recipient's link names another."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

# `form`: a subscription form's token; `form_confirm`: a double opt-in confirmation link.
PURPOSES = ("unsubscribe", "preferences", "open", "click", "form", "form_confirm")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@functools.lru_cache(maxsize=8)
def _cipher(secret_key: str) -> AESSIV:
    return AESSIV(hashlib.sha512(b"postroom/links/v2\x00" + secret_key.encode()).digest())


def sign(purpose: str, payload: dict, secret_key: str) -> str:
    """A sealed token for `payload` (sealing signs it too: SIV's tag)."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown link purpose {purpose!r}")
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    return _b64(_cipher(secret_key).encrypt(body, [purpose.encode()]))


def verify(purpose: str, token: str, secret_key: str) -> dict | None:
    """The payload if the token is intact and meant for `purpose`; otherwise None."""
    try:
        payload = json.loads(_cipher(secret_key).decrypt(_unb64(token), [purpose.encode()]))
    except (ValueError, TypeError, InvalidTag):
        return None
    return payload if isinstance(payload, dict) else None


def recipient_payload(workspace_id: str, contact_id: str | None, email: str | None, message_id: str | None) -> dict:
    """`email` None (and `contact_id` None): the link belongs to a message with several
    recipients and names none of them; its page asks which address it is for."""
    return {"w": workspace_id, "c": contact_id, "e": email, "m": message_id}


def names_message_only(payload: dict) -> bool:
    """A multi-recipient message's link: bound to the message, not to one address."""
    return not payload.get("e") and not payload.get("c") and bool(payload.get("m"))


def _route(pattern: str) -> Callable[[str, str], str]:
    """A URL builder `(base_url, token) -> URL` for one recipient-facing route."""
    def build(base_url: str, token: str) -> str:
        return f"{base_url.rstrip('/')}/" + pattern.format(token)
    return build


# URL layout of the recipient-facing routes (served by front/routes/pages.py).
unsubscribe_url = _route("u/{}")
preferences_url = _route("p/{}")
open_pixel_url = _route("t/o/{}.gif")
click_url = _route("t/c/{}")
form_url = _route("f/{}")  # a form's hosted page (GET) and where any website posts submissions (POST)
form_confirm_url = _route("f/confirm/{}")
