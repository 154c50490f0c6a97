"""Waiting for asynchronous work in tests: poll with a deadline, never a bare sleep."""

from __future__ import annotations

import time

FIRST_INTERVAL = 0.02
BACKOFF = 1.5


def wait_until(check, timeout: float = 20.0, what: str = "condition", interval: float = 0.25):
    """Call `check` until it returns something truthy, and return that; fail with the
    last value seen when `timeout` seconds pass. Looks again after FIRST_INTERVAL, then
    less and less often, at most every `interval` seconds: what comes at once is seen at
    once, and a long wait does not keep the front, the store and this process busy
    answering its looks (at a fixed 0.05 s they were a tenth of the suite's CPU)."""
    deadline = time.monotonic() + timeout
    last = None
    pause = min(FIRST_INTERVAL, interval)
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * BACKOFF, interval)
    raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})")


def wait_status(tenant, message_id: str, wanted: str, timeout: float = 30.0) -> dict:
    """The message's status view once its status is `wanted`."""
    def current():
        body = tenant.get(f"/email/{message_id}/status").json()["data"]
        return body if body["status"] == wanted else None
    return wait_until(current, timeout, f"message {message_id} status {wanted}")
