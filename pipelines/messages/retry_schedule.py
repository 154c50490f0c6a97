"""When a failed attempt is tried again: tables, not formulas, so a whole schedule can be
read (and documented) at a glance. Two schedules, one mechanism:

- webhook deliveries: twelve attempts spread over ~52 hours; a receiver that is down for
  a day still gets everything;
- SMTP deferrals (4xx, no connection): 5 s … 1 h, then every 4 h, for as long as the
  configured lifetime (POSTROOM_SEND_RETRY_LIFETIME_SECONDS, five days by default, as
  Postfix keeps mail), the last attempt falling on the lifetime's end.

Short waits ride the broker (a delayed message); longer ones wait in the store with a
next-attempt time and the scheduler enqueues them when due, so no long-delayed message
sits unacked in RabbitMQ. Which path a wait takes is decided on the table's
value, before `scale` (a test speed-up) is applied, so tests exercise both paths."""

from __future__ import annotations

import dataclasses

# Waits up to this long are a delayed broker message; longer ones wait in the store.
BROKER_DELAY_MAX_SECONDS = 60


@dataclasses.dataclass(frozen=True)
class NextAttempt:
    delay_seconds: float  # after scaling
    via_broker: bool


@dataclasses.dataclass(frozen=True)
class RetrySchedule:
    """`delays_seconds[n-1]`: the wait after the n-th failed attempt. Without a lifetime
    the table's end gives up; with one, the last wait repeats until the lifetime is spent."""
    delays_seconds: tuple[int, ...]

    @property
    def max_attempts(self) -> int:
        """Attempts in all when no lifetime is given."""
        return len(self.delays_seconds) + 1

    def after_failure(self, attempts_made: int, scale: float = 1.0, *, elapsed_seconds: float = 0.0,
                      lifetime_seconds: float | None = None) -> NextAttempt | None:
        """The next try after `attempts_made` attempts all failed, or None to give up.
        `elapsed_seconds`: since the first failure (against `lifetime_seconds`)."""
        if attempts_made < 1:
            raise ValueError("attempts_made counts the attempt that just failed; it is at least 1")
        if lifetime_seconds is None:
            if attempts_made >= self.max_attempts:
                return None
            delay = self.delays_seconds[attempts_made - 1]
            return NextAttempt(delay_seconds=delay * scale, via_broker=delay <= BROKER_DELAY_MAX_SECONDS)
        left = lifetime_seconds - elapsed_seconds
        if left <= 0:
            return None
        delay = self.delays_seconds[min(attempts_made, len(self.delays_seconds)) - 1]
        return NextAttempt(delay_seconds=min(delay * scale, left), via_broker=delay <= BROKER_DELAY_MAX_SECONDS)


WEBHOOKS = RetrySchedule((10, 30, 2 * 60, 10 * 60, 30 * 60, 60 * 60, 2 * 3600, 4 * 3600, 8 * 3600,
                          12 * 3600, 24 * 3600))
SMTP = RetrySchedule((5, 15, 30, 60, 5 * 60, 10 * 60, 20 * 60, 40 * 60, 3600, 2 * 3600, 4 * 3600))

# The webhook schedule under the names its callers and tests know.
RETRY_DELAYS_SECONDS = WEBHOOKS.delays_seconds
MAX_ATTEMPTS = WEBHOOKS.max_attempts


def after_failure(attempts_made: int, scale: float = 1.0) -> NextAttempt | None:
    """The webhook schedule's next try (see RetrySchedule.after_failure)."""
    return WEBHOOKS.after_failure(attempts_made, scale)
