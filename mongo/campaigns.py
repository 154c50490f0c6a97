"""Store queries for campaigns."""

from pymongo import ASCENDING, IndexModel  # noqa: F401

INDEXES: dict[str, list] = {}
