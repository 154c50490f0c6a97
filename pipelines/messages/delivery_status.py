"""The delivery status of one message as a small state machine, and `Transition`: every
status write of a message is one, built here (mongo/messages.apply only turns it into a
guarded write).

Events can arrive late, twice, or out of order (a DSN after an open, a second open).
A status only moves forward; a duplicate or backward event changes nothing, on purpose.
`bounced`, `failed`, `suppressed` and `cancelled` are final for delivery, but an open or
click recorded on a bounced message still counts as engagement elsewhere. The few moves
that are not forward are listed in AGAIN, each with its reason."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from pipelines.core.clock import ms_of

# No `rendered`: the render step writes nothing for a message that renders (its MIME
# travels in the send job, not the store: one write less per message on the hot path),
# and clients never see one (the API's statuses: docs/email.md).
ORDER = {
    "scheduled": 0, "queued": 0, "sending": 2, "sent": 3,
    "delivered": 4, "opened": 5, "clicked": 6,
}
FINAL = {"bounced", "failed", "suppressed", "cancelled"}
ALL = set(ORDER) | FINAL

# `due_ms` / `stall_ms` of a message nothing is left to do for (see `watch`): the same
# sentinel as an automation run's `wake_ms`, past any time.
NEVER_MS = 2**62


def watch(status: str, at: str, fields: Mapping | None = None) -> dict:
    """The two times the scheduler finds a message by, as integer epoch milliseconds,
    written with every status and kept in indexes of their own (the embedded store
    answers a range over one integer field from its index, but reads every message for a
    range over date strings, or for a status beside any range: four such finds a second
    cost it 1.9 s at 100,000 messages):
    - `due_ms`: when the scheduler must act unasked: a scheduled message's `due_at`, a
      claim's `lease_until` (past it the worker is taken for dead), a retry's
      `next_attempt_at` while it waits in the store;
    - `stall_ms`: when a queued message (not waiting for a retry) was last touched: the
      watchdog renders it again POSTROOM_MESSAGE_STALL_SECONDS later.
    NEVER_MS where none applies. `fields`: the message's (or the write's) `due_at`,
    `lease_until` and `next_attempt_at`.
    With a `lease_until` in `fields`, also `lease_ms`, its integer twin: what the guards
    on a lapsed lease compare (lapsed), never the string."""
    fields = fields or {}
    due = stall = NEVER_MS
    if status == "scheduled":
        due = ms_of(fields["due_at"])
    elif status == "sending":
        due = ms_of(fields["lease_until"])
    elif status == "queued":
        if fields.get("next_attempt_at"):
            due = ms_of(fields["next_attempt_at"])
        else:
            stall = ms_of(at)
            if fields.get("lease_token") and fields.get("lease_until"):  # born claimed: not before its lease ends
                stall = max(stall, ms_of(fields["lease_until"]))
    times = {"due_ms": due, "stall_ms": stall}
    if fields.get("lease_until"):
        times["lease_ms"] = ms_of(fields["lease_until"])
    return times


def born_claim(token: str, lease_until: str) -> dict:
    """The fields of a message stored already claimed (still `queued`) by the render job
    published for it with `token` (its `born` token), until `lease_until`: that job sends
    it without a claim write of its own — one store write less per message. Nothing else
    claims it meanwhile (`claim` takes only an unclaimed or lapsed message), and the
    watchdog leaves it alone until the lease is over (`watch`)."""
    return {"lease_token": token, "lease_until": lease_until}


# (from, to) moves the order alone does not allow.
AGAIN = {
    ("scheduled", "queued"): "a scheduled message comes due",
    ("sending", "queued"): "a claimed message goes back: an SMTP retry, a throttle hold, a dead worker's lease",
    ("sending", "sending"): "a claim taken again: a dead worker's lapsed lease, or the same job's retry",
    ("queued", "queued"): "a born claim given back (born_claim): a throttle hold or an SMTP retry",
}


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


@dataclasses.dataclass(frozen=True)
class Transition:
    """One guarded status write: `message_id` moves to `to` from one of `sources` (and
    only while `guard`, further flat conditions, holds), setting `fields` and adding
    `inc`. `via`: steps passed on the way (`sent` on the way to `delivered`), recorded
    with the same timestamp. `entry`: the status of the history entry it appends (with
    `detail`), None for none; `stamped`: it sets `<status>_at` for `to` and each `via`.
    Build one with the functions below, which take its sources from the table."""
    message_id: str
    to: str
    sources: tuple[str, ...]
    fields: Mapping = dataclasses.field(default_factory=dict)
    detail: str | None = None
    via: tuple[str, ...] = ()
    guard: Mapping = dataclasses.field(default_factory=dict)
    inc: Mapping = dataclasses.field(default_factory=dict)
    entry: str | None = None
    stamped: bool = True

    def __post_init__(self):
        wrong = [s for s in self.sources if not (can_move(s, self.to) or (s, self.to) in AGAIN)]
        if not self.sources or wrong:
            raise ValueError(f"no move {wrong or '(from nowhere)'} → {self.to}")


def forward(message_id: str, to: str, fields: Mapping | None = None, detail: str | None = None, *,
            via: tuple[str, ...] = (), once_sent: bool = False, current: str | None = None) -> Transition:
    """A forward move (an outcome, a bounce, an open): from any status it may follow
    (`once_sent`, see sources_for), or only from `current` when the caller knows it."""
    return Transition(message_id, to, (current,) if current else tuple(sources_for(to, once_sent=once_sent)),
                      fields or {}, detail, via, entry=to)


def fail(message_id: str, why: str) -> Transition:
    """Final `failed`, the reason as `error` and in the history."""
    return forward(message_id, "failed", {"error": why}, why)


def promote(message_id: str) -> Transition:
    """A scheduled message has come due (`queued_at` set)."""
    return Transition(message_id, "queued", ("scheduled",), entry="queued")


def cancel(message_id: str, *, current: str, detail: str | None = None, claim: str | None = None) -> Transition:
    """Final `cancelled`, from the status the caller saw (guarded on it): a scheduled
    email cancelled by its sender, or a campaign's message not yet handed to SMTP.
    `claim`: guarded on the message's `lease_token` too (UNCLAIMED: nobody holds it)."""
    moved = forward(message_id, "cancelled", detail=detail, current=current)
    return moved if claim is None else dataclasses.replace(moved, guard={"lease_token": claim})


UNCLAIMED = ""  # the `lease_token` of a message nobody holds


def lapsed(before_ms: int) -> dict:
    """The guard "its claim's lease ran out before `before_ms`" (epoch ms), on the
    integer `lease_ms` (watch): a date-like string anywhere in a filter, even beside
    `_id`, sends the embedded store's write to a tier that reads the whole collection
    under its one lock (50 such guarded writes took 11 s at 1,000 messages)."""
    return {"lease_ms": {"$lt": before_ms}}


def claim(message_id: str, token: str, lease_until: str, *, lapsed_before: int | None = None,
          own: bool = False, born: str | None = None, legacy: bool = False) -> Transition:
    """`sending` under our claim `token` until `lease_until`: an unclaimed queued message;
    with `lapsed_before` (epoch ms), a queued or sending one whose earlier claim's lease ran
    out before then (its worker died, or its born claim's job never ran); with `own`, one this token
    claimed already (the same job's retry); with `born`, a queued one stored claimed by
    that born token (born_claim), which the caller holds; `legacy`: a queued one stored
    before messages carried `lease_token`."""
    if lapsed_before:
        sources, guard = ("queued", "sending"), lapsed(lapsed_before)
    elif own:
        sources, guard = ("sending",), {"lease_token": token}
    elif legacy:
        sources, guard = ("queued",), {"lease_token": {"$exists": False}}
    else:
        sources, guard = ("queued",), {"lease_token": born or UNCLAIMED}
    return Transition(message_id, "sending", sources, {"lease_token": token, "lease_until": lease_until},
                      guard=guard, stamped=False)


def hold(message_id: str, token: str, *, current: str = "sending") -> Transition:
    """Claimed by `token` (`current`: `sending`, or `queued` for a born claim) but not
    tried (a throttle hold, too late in the lease): back to `queued` and unclaimed, no
    attempt counted, no history."""
    return Transition(message_id, "queued", (current,), {"lease_token": UNCLAIMED}, guard={"lease_token": token},
                      stamped=False)


def retry(message_id: str, token: str, note: str | None, *, progress: Mapping | None = None,
          next_attempt_at: str = "", current: str = "sending") -> Transition:
    """After a transient SMTP failure, under our claim `token`: back to `queued` with a
    `deferred` history entry and one more attempt (real progress: `revivals` starts
    over). `progress`: fields this attempt settled (`accepted_recipients`,
    `refused_recipients`: never sent again; `deferred_since`). `next_attempt_at`: when
    the attempt waits in the store (the scheduler enqueues its render when due), else
    it rides the broker with its MIME. `current`: as in `hold`."""
    detail = (note or "") + (f"; next attempt at {next_attempt_at}" if next_attempt_at else "")
    return Transition(message_id, "queued", (current,),
                      {"lease_token": UNCLAIMED, "last_error": note, "next_attempt_at": next_attempt_at, "revivals": 0,
                       **(progress or {})},
                      detail, guard={"lease_token": token}, inc={"attempts": 1}, entry="deferred", stamped=False)


def revive(message_id: str, *, lapsed_before: int) -> Transition:
    """The watchdog: `sending` past its lease (`lapsed_before`, epoch ms: its worker died, its MIME
    is gone) back to `queued`, one more revival; a claim taken meanwhile stands."""
    return Transition(message_id, "queued", ("sending",), {"lease_token": ""}, "send lease expired; sending again",
                      guard=lapsed(lapsed_before), inc={"revivals": 1}, entry="deferred",
                      stamped=False)


def give_up(message_id: str, why: str, *, lapsed_before: int | None = None) -> Transition:
    """The watchdog ends a stalled message `failed`: a queued one, or (`lapsed_before`)
    one still `sending` past its lease; guarded as in `revive`."""
    if lapsed_before is None:
        return forward(message_id, "failed", {"error": why}, why, current="queued")
    return dataclasses.replace(forward(message_id, "failed", {"error": why}, why, current="sending"),
                               guard=lapsed(lapsed_before))


# What a message of a batch ends as, in the order a batch counts them (mongo.batches, views.batch).
BATCH_OUTCOMES = ("delivered", "bounced", "failed", "suppressed", "cancelled")
