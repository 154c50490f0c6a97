"""Secrets at rest (webhook signing secrets, DKIM private keys): Fernet (AES-128-CBC +
HMAC-SHA256) under a key derived from POSTROOM_SECRET_KEY."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken


def _fernet(secret_key: str) -> Fernet:
    digest = hashlib.sha256(b"postroom/secret-box/v1\x00" + secret_key.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def seal(plaintext: str, secret_key: str) -> str:
    return _fernet(secret_key).encrypt(plaintext.encode()).decode("ascii")


def open_sealed(token: str, secret_key: str) -> str:
    """Raise ValueError if the token was not sealed under this secret key."""
    try:
        return _fernet(secret_key).decrypt(token.encode("ascii")).decode()
    except InvalidToken:
        raise ValueError("sealed value does not open with this secret key") from None
