from __future__ import annotations

from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase


def connect(url: str, database: str) -> tuple[AsyncMongoClient, AsyncDatabase]:
    """One client per process and event loop; the caller owns closing it."""
    client: AsyncMongoClient = AsyncMongoClient(
        url, tz_aware=True, serverSelectionTimeoutMS=5000, connectTimeoutMS=5000,
    )
    return client, client[database]


async def ping(db: AsyncDatabase) -> bool:
    try:
        await db.command("ping")
        return True
    except Exception:  # any failure means "not reachable" to a health check
        return False
