"""The inbound port's flood budget: messages a minute from one sending IP and from one
envelope sender (MAIL FROM), over a sliding window of WINDOW_SECONDS. Kept in the
receiving process (one `postroom inbound` per MX host): a flood is refused at RCPT with a
temporary 450 4.7.1 naming the wait, so a legitimate sender's MTA simply retries later,
and a refused attempt is not counted."""

from __future__ import annotations

import collections
import math

WINDOW_SECONDS = 60.0
# Senders remembered at most (the oldest forgotten first): bounded memory under a spray
# of forged MAIL FROMs.
MAX_TRACKED = 20_000


class FloodGate:
    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._seen: collections.OrderedDict[str, collections.deque[float]] = collections.OrderedDict()

    def _window(self, key: str, now: float) -> collections.deque[float]:
        times = self._seen.get(key)
        if times is None:
            times = self._seen[key] = collections.deque()
            while len(self._seen) > MAX_TRACKED:
                self._seen.popitem(last=False)
        while times and times[0] <= now - WINDOW_SECONDS:
            times.popleft()
        return times

    def wait_seconds(self, keys: list[str], now: float) -> int:
        """0 when one more message from these senders fits; else how long until it does."""
        if self.per_minute <= 0:
            return 0
        waits = [math.ceil(times[0] + WINDOW_SECONDS - now) for times in (self._window(k, now) for k in keys)
                 if len(times) >= self.per_minute]
        return max([1, *waits]) if waits else 0

    def count(self, keys: list[str], now: float) -> None:
        for key in keys:
            self._window(key, now).append(now)


def sender_keys(client_ip: str, mail_from: str) -> list[str]:
    return [f"ip:{client_ip}", f"from:{(mail_from or '<>').lower()}"]
