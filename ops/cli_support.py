"""What every `postroom` command module shares: a store session for one command."""

from __future__ import annotations

import asyncio
import sys

from mongo.client import connect


def run_store(settings, work):
    """`await work(db)` on a connection of its own, closed after; returns what work returned."""
    async def go():
        client, db = connect(settings.mongodb_url, settings.mongodb_database)
        try:
            return await work(db)
        finally:
            await client.close()
    return asyncio.run(go())


def one_or_missing(settings, work, missing: str):
    """`run_store(settings, work)`; None, with `missing` said on stderr, when work found nothing."""
    doc = run_store(settings, work)
    if doc is None:
        print(missing, file=sys.stderr)
    return doc
