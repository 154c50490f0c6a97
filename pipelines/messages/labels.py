"""A transactional email's `metadata` (up to 10 string pairs) and `tags` (up to 5 names):
the caller's own labels, stored with the message, shown by its status and carried in every
webhook event about it, so a receiver can tie an event to its own records without a
lookup.

Stored as given (`metadata` an object, `tags` an array) and once more as
`metadata_pairs`, each pair as one `key=value` string: a multikey index over one array
answers a `metadata[key]=value` filter (an index on `metadata.<key>` would need one
index per key a caller ever invents)."""

from __future__ import annotations

MAX_METADATA_PAIRS = 10
MAX_METADATA_KEY_CHARS = 40
MAX_METADATA_VALUE_CHARS = 500
METADATA_KEY_PATTERN = r"^[A-Za-z0-9_.-]+$"
MAX_TAGS = 5
MAX_TAG_CHARS = 50
TAG_PATTERN = r"^[A-Za-z0-9_-]+$"


def pair(key: str, value: str) -> str:
    """The indexed form of one pair (the key holds no `=`, so the first one splits it)."""
    return f"{key}={value}"


def stored_labels(metadata: dict[str, str] | None, tags: list[str] | None) -> dict:
    """The message document's fields for them. Tags are kept once each, in order."""
    metadata = dict(metadata or {})
    return {"metadata": metadata, "metadata_pairs": [pair(k, v) for k, v in metadata.items()],
            "tags": list(dict.fromkeys(tags or []))}


def event_labels(message: dict) -> dict:
    """What every webhook event of the message carries of them (empty when it has none,
    e.g. campaign mail)."""
    return {"metadata": dict(message.get("metadata") or {}), "tags": list(message.get("tags") or [])}
