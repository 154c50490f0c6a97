"""Operator passwords, hashed with scrypt (hashlib's, a memory-hard KDF: RFC 7914) under
a random salt; stored as `scrypt$<n>$<r>$<p>$<salt>$<hash>` (base64), so the parameters
can be raised later and older hashes still verify. Hashing takes ~0.1 s of CPU on purpose:
callers on an event loop run it in a thread."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

N, R, P = 2**15, 8, 1  # 32 MiB of memory a hash (128 * N * R bytes)
SALT_BYTES, HASH_BYTES = 16, 32
MIN_LENGTH = 12
_MAX_MEMORY = 64 * 1024 * 1024


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _derive(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_MAX_MEMORY, dklen=HASH_BYTES)


def hash_password(password: str) -> str:
    if len(password) < MIN_LENGTH:
        raise ValueError(f"a password has at least {MIN_LENGTH} characters")
    salt = secrets.token_bytes(SALT_BYTES)
    return f"scrypt${N}${R}${P}${_b64(salt)}${_b64(_derive(password, salt, N, R, P))}"


def verify(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, expected = stored.split("$")
        if scheme != "scrypt":
            return False
        derived = _derive(password, base64.b64decode(salt), int(n), int(r), int(p))
    except ValueError:
        return False
    return hmac.compare_digest(derived, base64.b64decode(expected))
