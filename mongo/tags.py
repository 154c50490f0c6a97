"""Store queries for tags."""

from pymongo import ASCENDING, IndexModel  # noqa: F401

INDEXES: dict[str, list] = {}
