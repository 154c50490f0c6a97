"""The message watchdog, for every message (transactional and campaign alike): a message
whose next step was lost gets its render enqueued again, and one handed back too often
ends `failed` with its reason. Run by the scheduler each pass (`requeue_stalled_messages`)
and once as it starts (`pick_up_accepted`), from ops/scheduler.py.

Safe to repeat and to race a redelivered job: rendering writes nothing for a message that
renders, and the send claim is the one guard, so only one attempt sends."""

from __future__ import annotations

import logging

from pymongo.asynchronous.database import AsyncDatabase

from mongo import batches, messages
from pipelines.core.clock import ms_of, now_ms
from pipelines.core.settings import Settings
from pipelines.messages import delivery_status
from pipelines.messages.delivery_status import NEVER_MS
from pipelines.workflows.publisher import Publisher

log = logging.getLogger("postroom.scheduler")

# At most this many stalled messages are handed back per watchdog pass (one tick).
WATCHDOG_PASS_LIMIT = 500
# At most this many messages are picked up at a start (more wait for the watchdog).
PICKUP_LIMIT = 100_000


async def requeue_stalled_messages(db: AsyncDatabase, settings: Settings, publisher: Publisher, *,
                                   any_due: bool = True) -> int:
    """One watchdog pass; how many stalled messages it found. (`any_due` False: the
    caller's probe found no message due, so no claim has lapsed: only stale ones are looked for.)

    - `queued` and untouched for `message_stall_seconds` (and not waiting in the store for
      its next SMTP attempt): its render job, or the send job carrying its MIME, was lost
      (a crash between store and broker, a purged queue, a job the broker refused). It is
      touched (`updated_at`) so the next passes leave it alone for as long again.
    - `sending` past its claim's lease: its worker died mid-send and the job carrying its
      MIME is gone too; or `queued` past its born claim's lease: the job it was handed to
      never ran (its publisher died between the store write and the publish). It goes
      back to `queued`, unclaimed (guarded on the lapsed lease).

    Each hand-back counts (`revivals`; an SMTP deferral, real progress, resets it): a
    message handed back `message_max_revivals` times ends `failed` with the reason (its
    last error) instead of going round for ever."""
    stale, lapsed = await find_stalled(db, settings, any_due=any_due)
    if not lapsed and not stale:
        return 0
    stale_spent, stale_again = _split_spent(stale, settings)
    lapsed_spent, lapsed_again = _split_spent(lapsed, settings)
    if stale_spent or lapsed_spent:
        await give_up(db, settings, stale_spent, lapsed_spent)
    await hand_back(db, settings, publisher, stale_again, lapsed_again)
    return len(lapsed) + len(stale)


async def find_stalled(db: AsyncDatabase, settings: Settings, *, any_due: bool = True) -> tuple[list[dict], list[dict]]:
    """(stale `queued`, lapsed claims), at most WATCHDOG_PASS_LIMIT together, lapsed first."""
    lapsed = await messages.lapsed_claims(db, WATCHDOG_PASS_LIMIT) if any_due else []
    room = WATCHDOG_PASS_LIMIT - len(lapsed)
    stale = await messages.stale_queued(db, settings.message_stall_seconds, room) if room > 0 else []
    return stale, lapsed


def _split_spent(docs: list[dict], settings: Settings) -> tuple[list[dict], list[dict]]:
    """(handed back `message_max_revivals` times already, the others)."""
    spent: list[dict] = []
    again: list[dict] = []
    for doc in docs:
        (spent if int(doc.get("revivals") or 0) >= settings.message_max_revivals else again).append(doc)
    return spent, again


async def hand_back(db: AsyncDatabase, settings: Settings, publisher: Publisher, stale: list[dict],
                    lapsed: list[dict]) -> None:
    """Stale messages touched, lapsed ones back to `queued` (each one more revival), and
    their renders enqueued."""
    stale_ids, lapsed_ids = [d["_id"] for d in stale], [d["_id"] for d in lapsed]
    now = now_ms()
    await messages.requeue(db, stale_ids, [delivery_status.revive(mid, lapsed_before=now) for mid in lapsed_ids])
    await publisher.render(lapsed_ids + stale_ids)
    if lapsed_ids or stale_ids:
        log.warning("watchdog: rendering again %d queued message(s) left for %d s and %d whose send lease ran out",
                    len(stale_ids), settings.message_stall_seconds, len(lapsed_ids))


async def give_up(db: AsyncDatabase, settings: Settings, stale: list[dict], lapsed: list[dict]) -> None:
    """Messages handed back too often end `failed` with the reason, and their batches count them."""
    now = now_ms()
    moved = set(await messages.apply_each(
        db, [delivery_status.give_up(d["_id"], _gave_up(d, settings)) for d in stale]
        + [delivery_status.give_up(d["_id"], _gave_up(d, settings), lapsed_before=now, current=d["status"])
           for d in lapsed]))
    await batches.record_finished(db, [(d, "failed") for d in stale + lapsed if d["_id"] in moved])
    log.error("watchdog: gave up on %d message(s) handed back %d times", len(moved), settings.message_max_revivals)


def _gave_up(doc: dict, settings: Settings) -> str:
    last = f"; last error: {doc['last_error']}" if doc.get("last_error") else ""
    return (f"gave up: handed back {doc.get('revivals') or 0} times by the watchdog and still not sent "
            f"(POSTROOM_MESSAGE_MAX_REVIVALS={settings.message_max_revivals}){last}")


def _orphaned(doc: dict, started_ms: int, in_process: bool) -> bool:
    """Accepted before this start and with no job left that will hand it on: with the
    in-process broker, every one (its jobs went with the process); with RabbitMQ, one
    whose born claim's lease ran out (the front stopped between its store write and its
    publish, or the job was lost) — an unclaimed one's job may still wait in its queue."""
    if ms_of(doc["updated_at"]) >= started_ms:
        return False  # written since: the running front published it
    return in_process or (bool(doc.get("lease_token")) and int(doc.get("lease_ms") or NEVER_MS) < started_ms)


async def pick_up_accepted(db: AsyncDatabase, settings: Settings, publisher: Publisher, started_ms: int) -> int:
    """Once, when the scheduler starts (habit 18: work accepted but not handed on is
    picked up at start, not after POSTROOM_MESSAGE_STALL_SECONDS): queued messages left
    without a job (_orphaned) are handed back and rendered again; with the in-process
    broker, so are messages left `sending` (their worker was this service's, now gone).
    Nothing is sent twice: the send claim is the one guard (a render job that still holds
    a born claim finds it given back here, and claims nothing)."""
    in_process = not settings.amqp_url
    stale = [d["_id"] for d in await messages.in_flight(db, "queued", PICKUP_LIMIT)
             if _orphaned(d, started_ms, in_process)]
    lapsed = ([d["_id"] for d in await messages.in_flight(db, "sending", PICKUP_LIMIT)
               if ms_of(d["updated_at"]) < started_ms] if in_process else [])
    for start in range(0, len(stale) + len(lapsed), WATCHDOG_PASS_LIMIT):
        stale_part = stale[start:start + WATCHDOG_PASS_LIMIT]
        lapsed_part = lapsed[max(0, start - len(stale)):max(0, start + WATCHDOG_PASS_LIMIT - len(stale))]
        await messages.requeue(db, stale_part, [delivery_status.revive(mid, lapsed_before=NEVER_MS)
                                                for mid in lapsed_part])
        await publisher.render(stale_part + lapsed_part)
    if stale or lapsed:
        log.warning("scheduler start: picked up %d queued and %d sending message(s) left without a job",
                    len(stale), len(lapsed))
    return len(stale) + len(lapsed)
