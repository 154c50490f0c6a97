"""The delivery status of one message as a small state machine.

Events can arrive late, twice, or out of order (a DSN after an open, a second open).
A status only moves forward; a duplicate or backward event changes nothing, on purpose.
`bounced`, `failed`, `suppressed` and `cancelled` are final for delivery, but an open or
click recorded on a bounced message still counts as engagement elsewhere."""

from __future__ import annotations

ORDER = {
    "scheduled": 0, "queued": 0, "rendered": 1, "sending": 2, "sent": 3,
    "delivered": 4, "opened": 5, "clicked": 6,
}
FINAL = {"bounced", "failed", "suppressed", "cancelled"}
ALL = set(ORDER) | FINAL


def can_move(current: str, new: str) -> bool:
    if current == new:
        return False
    if current in FINAL:
        return False
    if new in FINAL:
        return True
    return ORDER[new] > ORDER[current]


def sources_for(new: str, *, once_sent: bool = False) -> list[str]:
    """The statuses a message may be in for `new` to apply (for guarded updates).
    `once_sent`: only from a status the send step has reached — for what the recipient's
    side reports (an open, a click, a late bounce), which must not move a message still
    `queued` for the retry of another recipient."""
    return [s for s in ALL if can_move(s, new) and (not once_sent or ORDER.get(s, -1) >= ORDER["sent"])]
