"""Signing in to the console and out of it (front/console/). A workspace's person signs
in with an API key that holds the `console` permission, an operator (`postroom operator
create`) with a name and password; the session that answers is kept by its cookie's hash
(mongo/console_sessions.py) for SESSION_SECONDS, with a CSRF token of its own that every
form of the console carries."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import secrets

from pymongo.asynchronous.database import AsyncDatabase

from mongo import api_keys as key_store
from mongo import console_sessions, operators, workspaces
from pipelines.core import api_keys, passwords
from pipelines.core.clock import now_ms
from pipelines.core.errors import Forbidden, Unauthorized

# A session ends this long after sign-in, used or not (no sliding renewal: a stolen
# cookie is worth a working day at most).
SESSION_SECONDS = 8 * 3600
NOT_A_KEY = "That is not a valid API key."
NOT_AN_OPERATOR = "That name and password do not match an operator."


@functools.cache
def _nobody() -> str:
    """Verified against when the name is unknown, so an unknown name takes as long as a wrong password."""
    return passwords.hash_password(secrets.token_urlsafe(16))


@dataclasses.dataclass(frozen=True)
class Opened:
    cookie: str  # the cookie's value, shown to the browser once and stored only as its hash
    session: dict


def session_id(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


async def sign_in_with_key(db: AsyncDatabase, key: str) -> Opened:
    """A session of the key's workspace. 401 for a key that is unknown or revoked, 403 for
    one without the `console` permission."""
    key = key.strip()
    found = await key_store.find_by_key(db, key) if api_keys.looks_like_key(key) else None
    if found is None or found.get("revoked"):
        raise Unauthorized(NOT_A_KEY)
    if not api_keys.grants(found.get("permissions") or [], api_keys.CONSOLE):
        raise Forbidden(f"This API key lacks the '{api_keys.CONSOLE}' permission.")
    if await workspaces.get(db, found["workspace_id"]) is None:
        raise Unauthorized(NOT_A_KEY)
    return await _open(db, workspace_id=found["workspace_id"], key_id=found["_id"])


async def sign_in_operator(db: AsyncDatabase, name: str, password: str) -> Opened:
    """An operator's session; 401 unless the name and password match (the hash is checked
    in a thread: it takes ~0.1 s of CPU on purpose)."""
    found = await operators.get(db, name) if name.strip() else None
    stored = found["password_hash"] if found else _nobody()
    matches = await asyncio.to_thread(passwords.verify, password, stored)
    if found is None or not matches:
        raise Unauthorized(NOT_AN_OPERATOR)
    return await _open(db, operator_id=found["_id"])


async def create_operator(db: AsyncDatabase, name: str, password: str) -> dict | None:
    """`postroom operator create`: None when the name is taken; ValueError for a short password."""
    return await operators.create(db, name, passwords.hash_password(password))


async def _open(db: AsyncDatabase, **who: str) -> Opened:
    cookie = secrets.token_urlsafe(32)
    session = await console_sessions.insert(db, session_id(cookie), csrf=secrets.token_urlsafe(32),
                                            expires_ms=now_ms() + SESSION_SECONDS * 1000, **who)
    return Opened(cookie, session)


async def sign_out(db: AsyncDatabase, cookie: str) -> bool:
    return await console_sessions.delete(db, session_id(cookie))
