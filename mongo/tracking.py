"""Store queries for tracking."""

from pymongo import ASCENDING, IndexModel  # noqa: F401

INDEXES: dict[str, list] = {}
