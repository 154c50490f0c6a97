"""API key material: generation, hashing, permission checks. Keys are shown once and
stored only as SHA-256 hashes (they are 256-bit random, so a fast hash is the right one)."""

from __future__ import annotations

import hashlib
import secrets

LIVE_PREFIX = "tm_live_"
SANDBOX_PREFIX = "tm_test_"

# Permission names are "<area>:read" / "<area>:write"; "*" grants everything and
# "<area>:*" both halves of one area.
AREAS = (
    "contacts", "tags", "lists", "segments", "templates", "campaigns", "email",
    "suppressions", "bounces", "analytics", "domains", "webhooks", "automations",
    "tracking", "conversions", "forms", "inbound",
)
ALL_PERMISSIONS = tuple(f"{a}:{m}" for a in AREAS for m in ("read", "write"))
# Signing in to the console (front/console/) with this key: a permission of its own, with no
# read/write halves; what the console then shows and does still needs the areas' permissions.
CONSOLE = "console"


def generate_key(sandbox: bool) -> str:
    return (SANDBOX_PREFIX if sandbox else LIVE_PREFIX) + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def looks_like_key(key: str) -> bool:
    return key.startswith((LIVE_PREFIX, SANDBOX_PREFIX)) and 16 < len(key) < 200


def is_valid_permission(name: str) -> bool:
    if name in ("*", CONSOLE):
        return True
    area, _, mode = name.partition(":")
    return area in AREAS and mode in {"read", "write", "*"}


def grants(permissions: list[str], needed: str) -> bool:
    """`needed` is "<area>:<mode>" or CONSOLE (granted by itself or by "*")."""
    area = needed.split(":", 1)[0]
    return "*" in permissions or needed in permissions or f"{area}:*" in permissions
