"""Waiting for asynchronous work in tests: poll with a deadline, never a bare sleep."""

from __future__ import annotations

import time


def wait_until(check, timeout: float = 20.0, what: str = "condition", interval: float = 0.05):
    """Call `check` until it returns something truthy, and return that; fail with the
    last value seen when `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})")


def wait_status(tenant, message_id: str, wanted: str, timeout: float = 30.0) -> dict:
    """The message's status view once its status is `wanted`."""
    def current():
        body = tenant.get(f"/email/{message_id}/status").json()["data"]
        return body if body["status"] == wanted else None
    return wait_until(current, timeout, f"message {message_id} status {wanted}")
