"""Running a workflow's independent store writes at once, safely."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def all_finished(*steps: Awaitable[Any]) -> list[Any]:
    """Runs `steps` at once and returns their results once every one has finished; then the
    first failure, if any, is raised. (A bare `asyncio.gather` raises the first failure at
    once and leaves the other steps running unobserved, their own failures never seen.)"""
    outcomes = await asyncio.gather(*steps, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes
