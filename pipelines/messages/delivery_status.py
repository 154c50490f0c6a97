"""The delivery status of one message as a state machine: a table of what each event does
to a message in each status (EVENTS, rendered in docs/email.md by `table_markdown`), `move`
to ask it, and `Transition`: every status write of a message is one, built here from the
table (mongo/messages.apply only turns it into a guarded write whose filter is the
statuses the event may move a message from).

Events can arrive late, twice, or out of order (a DSN after an open, a second open).
An event the table has no row for in the message's status changes nothing, on purpose:
a status only moves forward but for the claim's moves (`queued` ⇄ `sending`).
`bounced`, `failed`, `suppressed` and `cancelled` are final for delivery, but an open or
click recorded on a bounced message still counts as engagement elsewhere."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import NamedTuple, NotRequired, TypedDict

from pipelines.core.clock import ms_of

# No `rendered`: the render step writes nothing for a message that renders (its MIME
# travels in the send job, not the store: one write less per message on the hot path),
# and clients never see one (the API's statuses: docs/email.md).
UNSENT = ("scheduled", "queued", "sending")
SENT = ("sent", "delivered", "opened", "clicked")  # the send step has reached it
LIVE = (*UNSENT, *SENT)
FINAL = ("bounced", "failed", "suppressed", "cancelled")
ALL = {*LIVE, *FINAL}


class Move(NamedTuple):
    """One event of the table: the statuses it moves a message from, the status it moves
    it to, and when it happens (with the guard beside the status, if any)."""
    sources: tuple[str, ...]
    to: str
    when: str


EVENTS: dict[str, Move] = {
    "come_due": Move(("scheduled",), "queued", "a scheduled message's `send_at` has come"),
    "claim": Move(("queued",), "sending",
                  "the send step claims it: nobody holds it (`lease_token` \"\"), "
                  "or the caller's job holds its born claim"),
    "claim_lapsed": Move(("queued", "sending"), "sending",
                         "the send step claims it from a claim whose lease ran out (`lease_ms` < now): "
                         "its worker died, or its born claim's job never ran"),
    "claim_again": Move(("sending",), "sending",
                        "the same job's retry takes its own claim back (`lease_token` its token)"),
    "hold": Move(("queued", "sending"), "queued",
                 "claimed (the claim's token) but not tried: a throttle hold, too late in the lease; "
                 "no attempt counted"),
    "defer": Move(("queued", "sending"), "queued",
                  "claimed (the claim's token), a transient SMTP failure: one more attempt, a `deferred` entry"),
    "wait_over": Move(("queued",), "queued",
                      "a retry waiting in the store is due (its attempt count as seen): its render is enqueued"),
    "handoff_lost": Move(("queued",), "queued",
                         "its rendered send job never reached the broker (unclaimed, or a born claim given back)"),
    "revive": Move(("queued", "sending"), "queued",
                   "the watchdog: still `sending`, or `queued` under a born claim, past its lease (`lease_ms` < now)"),
    "requeue_stale": Move(("queued",), "queued", "the watchdog: `queued` and untouched too long, rendered again"),
    "park": Move(("queued", "sending"), "queued",
                 "its campaign is paused: unclaimed, waiting in the store until the resume makes it due"),
    "deliver": Move(("queued", "sending", "sent"), "delivered",
                    "the receiving server accepted a recipient (`sent` recorded on the way)"),
    "bounce": Move(("queued", "sending"), "bounced", "a receiving server refused every recipient (5xx) when sent"),
    "fail": Move(LIVE, "failed", "no recipient can be sent to, retries spent, or the watchdog gave up"),
    "suppress": Move(("queued", "sending"), "suppressed", "every recipient was suppressed by the time it was rendered"),
    "cancel": Move(LIVE, "cancelled", "its sender or its campaign cancelled it (from the status seen)"),
    "open": Move(("sent", "delivered"), "opened", "the recipient opened it"),
    "click": Move(("sent", "delivered", "opened"), "clicked", "the recipient clicked a link"),
    "report_bounce": Move(SENT, "bounced", "a bounce report (DSN, ARF) after it was sent"),
}

# The events that move a message forward to a status: the send step's (and a canceller's)
# outcomes, and what the recipient's side reports once it is sent (`forward`).
OUTCOMES = ("deliver", "bounce", "fail", "suppress", "cancel")
REPORTS = ("open", "click", "report_bounce")

TABLE: dict[tuple[str, str], str] = {(status, event): move.to for event, move in EVENTS.items()
                                     for status in move.sources}


class Refused(ValueError):
    """An event the table has no row for in a message's status."""


def move(status: str, event: str) -> str:
    """What `event` does to a message in `status`: its new status; Refused when the table
    has no such row (the message stays as it is)."""
    try:
        return TABLE[status, event]
    except KeyError:
        raise Refused(f"no move {event!r} from {status!r}") from None


def sources(event: str) -> tuple[str, ...]:
    """The statuses `event` may move a message from: what its guarded write filters on."""
    return EVENTS[event].sources


def can_move(current: str, new: str) -> bool:
    """Some event moves a message from `current` to `new`."""
    return any(to == new for (status, _), to in TABLE.items() if status == current)


def toward(to: str, *, once_sent: bool = False) -> str:
    """The event that moves a message forward to `to`: an outcome, or (`once_sent`) a
    report from the recipient's side, which must not move a message still `queued` for
    the retry of another recipient."""
    return next(event for event in (REPORTS if once_sent else OUTCOMES) if EVENTS[event].to == to)


def sources_for(to: str, *, once_sent: bool = False) -> tuple[str, ...]:
    """The statuses a message may be in for a move forward to `to` (see toward)."""
    return sources(toward(to, once_sent=once_sent))


def table_markdown() -> str:
    """The table as docs/email.md shows it (a test keeps the two the same)."""
    rows = [f"| `{event}` | {', '.join(f'`{s}`' for s in move.sources)} | `{move.to}` | {move.when} |"
            for event, move in EVENTS.items()]
    return "\n".join(["| event | from | to | when |", "|---|---|---|---|", *rows])


# `due_ms` / `stall_ms` of a message nothing is left to do for (see `watch`): the same
# sentinel as an automation run's `wake_ms`, past any time.
NEVER_MS = 2**62


class WatchTimes(TypedDict):
    """A message's scheduler times (`watch`)."""
    due_ms: int
    stall_ms: int
    updated_ms: int  # when the status last changed: what an operator's "in the last hour" ranges over
    lease_ms: NotRequired[int]


def watch(status: str, at: str, fields: Mapping | None = None) -> WatchTimes:
    """The times the scheduler and operators find a message by, as integer epoch milliseconds,
    written with every status and kept in indexes of their own (the embedded store
    answers a range over one integer field from its index, but reads every message for a
    range over date strings, or for a status beside any range: four such finds a second
    cost it 1.9 s at 100,000 messages):
    - `due_ms`: when the scheduler must act unasked: a scheduled message's `due_at`, a
      claim's `lease_until` (past it the worker is taken for dead; a born claim's too:
      past it the job it was handed to is taken for lost), a retry's `next_attempt_at`
      while it waits in the store;
    - `stall_ms`: when a queued message (not waiting for a retry) was last touched: the
      watchdog renders it again POSTROOM_MESSAGE_STALL_SECONDS later;
    - `updated_ms`: `at`, when the status last changed (the operator's reads by time).
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
                due = ms_of(fields["lease_until"])
                stall = max(stall, due)
    times: WatchTimes = {"due_ms": due, "stall_ms": stall, "updated_ms": ms_of(at)}
    if fields.get("lease_until"):
        times["lease_ms"] = ms_of(fields["lease_until"])
    return times


def born_claim(token: str, lease_until: str, *, job_due_ms: int | None = None) -> dict:
    """The fields of a message stored already claimed (still `queued`) by the render job
    published for it with `token` (its `born` token), until `lease_until`: that job sends
    it without a claim write of its own — one store write less per message. Nothing else
    claims it meanwhile (`claim` takes only an unclaimed or lapsed message), and the
    watchdog leaves it alone until the lease is over (`watch`). `job_due_ms`: when a
    delayed job (a throttle hold, a deferral) becomes due: until then it cannot be sending
    the message, so a campaign's cancel need not wait for it (`not_held`)."""
    return {"lease_token": token, "lease_until": lease_until,
            **({"job_due_ms": job_due_ms} if job_due_ms is not None else {})}


# A delayed job is taken as possibly running this long before its due time (clocks of
# the processes that publish and consume it may differ a little).
JOB_DUE_MARGIN_MS = 2_000


def not_held(message: Mapping, at_ms: int) -> dict | None:
    """The guard "no job can be sending this queued message at `at_ms`", from what was read
    of it (`lease_token`, `job_due_ms`): nobody holds it, or it is born claimed by a
    delayed job not due yet (born_claim `job_due_ms`); None when a job may be sending it."""
    token = message.get("lease_token") or UNCLAIMED
    if token == UNCLAIMED:
        return {"lease_token": UNCLAIMED}
    if int(message.get("job_due_ms") or 0) > at_ms + JOB_DUE_MARGIN_MS:
        return {"lease_token": token, "job_due_ms": {"$gt": at_ms + JOB_DUE_MARGIN_MS}}
    return None


@dataclasses.dataclass(frozen=True)
class Transition:
    """One guarded status write: `event` moves `message_id` from one of `sources` (those
    of the event's table row the caller allows, all of them by default; and only while
    `guard`, further flat conditions, holds) to the status the table says (`to`), setting
    `fields` and adding `inc`. `via`: steps passed on the way (`sent` on the way to
    `delivered`), recorded with the same timestamp. `entry`: the status of the history
    entry it appends (with `detail`), None for none; `stamped`: it sets `<status>_at` for
    `to` and each `via`. Build one with the functions below."""
    message_id: str
    event: str
    sources: tuple[str, ...] = ()
    fields: Mapping = dataclasses.field(default_factory=dict)
    detail: str | None = None
    via: tuple[str, ...] = ()
    guard: Mapping = dataclasses.field(default_factory=dict)
    inc: Mapping = dataclasses.field(default_factory=dict)
    entry: str | None = None
    stamped: bool = True

    def __post_init__(self):
        if self.event not in EVENTS:
            raise Refused(f"no event {self.event!r}")
        if not self.sources:
            object.__setattr__(self, "sources", sources(self.event))
        if len({move(status, self.event) for status in self.sources}) != 1:
            raise Refused(f"{self.event!r} moves {self.sources} to different statuses")

    @property
    def to(self) -> str:
        return move(self.sources[0], self.event)


def forward(message_id: str, to: str, fields: Mapping | None = None, detail: str | None = None, *,
            via: tuple[str, ...] = (), once_sent: bool = False, current: str | None = None) -> Transition:
    """A forward move to `to` (an outcome, a bounce, an open: see toward): from any status
    its event moves from, or only from `current` when the caller knows it."""
    return Transition(message_id, toward(to, once_sent=once_sent), (current,) if current else (),
                      fields or {}, detail, via, entry=to)


def fail(message_id: str, why: str) -> Transition:
    """Final `failed`, the reason as `error` and in the history."""
    return forward(message_id, "failed", {"error": why}, why)


def promote(message_id: str) -> Transition:
    """A scheduled message has come due (`queued_at` set)."""
    return Transition(message_id, "come_due", entry="queued")


def cancel(message_id: str, *, current: str, detail: str | None = None, claim: str | None = None,
           guard: Mapping | None = None) -> Transition:
    """Final `cancelled`, from the status the caller saw (guarded on it): a scheduled
    email cancelled by its sender, or a campaign's message not yet handed to SMTP.
    `claim`: guarded on the message's `lease_token` too (UNCLAIMED: nobody holds it);
    `guard`: any other such condition (not_held)."""
    moved = forward(message_id, "cancelled", detail=detail, current=current)
    if guard is not None:
        return dataclasses.replace(moved, guard=guard)
    return moved if claim is None else dataclasses.replace(moved, guard={"lease_token": claim})


UNCLAIMED = ""  # the `lease_token` of a message nobody holds


def lapsed(before_ms: int) -> dict:
    """The guard "its claim's lease ran out before `before_ms`" (epoch ms), on the
    integer `lease_ms` (watch): a date-like string anywhere in a filter, even beside
    `_id`, sends the embedded store's write to a tier that reads the whole collection
    under its one lock (50 such guarded writes took 11 s at 1,000 messages)."""
    return {"lease_ms": {"$lt": before_ms}}


def _claimed(message_id: str, event: str, token: str, lease_until: str, guard: Mapping) -> Transition:
    return Transition(message_id, event, fields={"lease_token": token, "lease_until": lease_until}, guard=guard,
                      stamped=False)


def claim(message_id: str, token: str, lease_until: str, *, born: str | None = None) -> Transition:
    """`sending` under our claim `token` until `lease_until`: a queued message nobody
    holds, or (`born`) one stored claimed by that born token (born_claim), which the
    caller holds."""
    return _claimed(message_id, "claim", token, lease_until, {"lease_token": born or UNCLAIMED})


def claim_lapsed(message_id: str, token: str, lease_until: str, *, before_ms: int) -> Transition:
    """As `claim`, a queued or sending message whose earlier claim's lease ran out before
    `before_ms` (epoch ms): its worker died, or its born claim's job never ran."""
    return _claimed(message_id, "claim_lapsed", token, lease_until, lapsed(before_ms))


def claim_again(message_id: str, token: str, lease_until: str) -> Transition:
    """As `claim`, a message this token claimed already (the same job's retry), with a
    fresh lease."""
    return _claimed(message_id, "claim_again", token, lease_until, {"lease_token": token})


def hold(message_id: str, token: str, *, current: str = "sending", handed_to: Mapping | None = None) -> Transition:
    """Claimed by `token` (`current`: `sending`, or `queued` for a born claim) but not
    tried (a throttle hold, too late in the lease): back to `queued`, no attempt counted,
    no history; born claimed by the job it is handed to (`handed_to`: born_claim's
    fields), else unclaimed."""
    return Transition(message_id, "hold", (current,), {**_next_claim(handed_to)}, guard={"lease_token": token},
                      stamped=False)


def _next_claim(handed_to: Mapping | None) -> Mapping:
    """A message going back to `queued` for a job published right after the write: born
    claimed by that job (born_claim), so that if the publish never happens (the worker
    killed in between) the watchdog takes it up when the claim's lease ends (`watch`),
    not POSTROOM_MESSAGE_STALL_SECONDS later; unclaimed when no job is to follow."""
    return handed_to or {"lease_token": UNCLAIMED}


def retry(message_id: str, token: str, note: str | None, *, progress: Mapping | None = None,
          next_attempt_at: str = "", current: str = "sending", handed_to: Mapping | None = None) -> Transition:
    """After a transient SMTP failure, under our claim `token`: back to `queued` with a
    `deferred` history entry and one more attempt (real progress: `revivals` starts
    over). `progress`: fields this attempt settled (`accepted_recipients`,
    `refused_recipients`: never sent again; `deferred_since`). `next_attempt_at`: when
    the attempt waits in the store (the scheduler enqueues its render when due), else
    it rides the broker with its MIME (`handed_to`: the born claim of that job). `current`:
    as in `hold`."""
    detail = (note or "") + (f"; next attempt at {next_attempt_at}" if next_attempt_at else "")
    return Transition(message_id, "defer", (current,),
                      {**_next_claim(None if next_attempt_at else handed_to), "last_error": note,
                       "next_attempt_at": next_attempt_at, "revivals": 0,
                       **(progress or {})},
                      detail, guard={"lease_token": token}, inc={"attempts": 1}, entry="deferred", stamped=False)


def wait_over(message_id: str, attempts: int) -> Transition:
    """A retry that waited in the store is due: its wait is cleared, guarded on the wait
    still being set and the attempt count seen (an integer, not the timestamp), so two
    schedulers never both enqueue one retry."""
    return Transition(message_id, "wait_over", fields={"next_attempt_at": ""},
                      guard={"attempts": attempts, "next_attempt_at": {"$gt": ""}}, stamped=False)


def handoff_lost(message_id: str, why: str, born: tuple[str, ...] = ()) -> Transition:
    """A render whose send job did not reach the broker: the reason stays on the still
    queued message (`last_error`, a `deferred` entry) for the watchdog to show if it has
    to give up; a born claim the render job held (`born`) is given up, so the watchdog's
    stall wait starts now."""
    return Transition(message_id, "handoff_lost", fields={"last_error": why, "lease_token": UNCLAIMED}, detail=why,
                      guard={"lease_token": {"$in": [UNCLAIMED, *born]}}, entry="deferred", stamped=False)


def requeue_stale(message_id: str) -> Transition:
    """The watchdog renders a stale queued message again: touched (so the next pass
    leaves it alone for a while), one more revival; a born claim on it lapsed long ago
    (watch) and ends here."""
    return Transition(message_id, "requeue_stale", fields={"lease_token": UNCLAIMED}, inc={"revivals": 1},
                      stamped=False)


def revive(message_id: str, *, lapsed_before: int) -> Transition:
    """The watchdog: `sending`, or `queued` under a born claim, past its lease
    (`lapsed_before`, epoch ms: its worker died, its MIME is gone, or the job it was
    handed to never reached the broker) back to `queued` and unclaimed, one more
    revival; a claim taken meanwhile stands."""
    return Transition(message_id, "revive", fields={"lease_token": UNCLAIMED},
                      detail="send lease expired; sending again",
                      guard=_lapsed_claim(lapsed_before),
                      inc={"revivals": 1}, entry="deferred", stamped=False)


# The `next_attempt_at` of a message parked while its campaign is paused: past any
# scheduler range (its `due_ms` never comes) until the resume sets it to now.
PARKED_AT = "9999-12-31T00:00:00.000Z"


def park(message_id: str, *, current: str, claim: str) -> Transition:
    """A paused campaign's message, held (`current`, under `claim`) but not tried: back to
    `queued`, unclaimed, waiting in the store like a retry (watch: the watchdog leaves it
    alone) until its campaign resumes (`parked`: what the resume finds it by, beside the
    campaign's index; no date-like string in that filter); no attempt counted, no history."""
    return Transition(message_id, "park", (current,),
                      {"lease_token": UNCLAIMED, "next_attempt_at": PARKED_AT, "parked": True},
                      guard={"lease_token": claim}, stamped=False)


def _lapsed_claim(before_ms: int) -> dict:
    """The guard "held under a claim (born or not) whose lease ran out before `before_ms`"."""
    return {**lapsed(before_ms), "lease_token": {"$ne": UNCLAIMED}}


def give_up(message_id: str, why: str, *, lapsed_before: int | None = None, current: str = "sending") -> Transition:
    """The watchdog ends a stalled message `failed`: a queued one, or (`lapsed_before`)
    one held past its lease (`current`: `sending`, or `queued` under a born claim);
    guarded as in `revive`."""
    if lapsed_before is None:
        return forward(message_id, "failed", {"error": why}, why, current="queued")
    return dataclasses.replace(forward(message_id, "failed", {"error": why}, why, current=current),
                               guard=_lapsed_claim(lapsed_before))


# What a message of a batch ends as, in the order a batch counts them (mongo.batches, views.batch).
BATCH_OUTCOMES = ("delivered", "bounced", "failed", "suppressed", "cancelled")
