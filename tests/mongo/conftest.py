"""Fixtures for tests that talk to the store directly, without the front."""

from __future__ import annotations

import uuid

import pytest

from tests.support.harness import StoreThread


@pytest.fixture
def private_db(store_url, database_name):
    """A database of its own for one test, reached through the async driver."""
    thread = StoreThread(store_url, f"{database_name}_{uuid.uuid4().hex[:8]}")
    yield thread
    thread.close()
