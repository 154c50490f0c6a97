"""Does every query and guarded write of the hot paths cost the same at 1,000 and at
100,000 documents? (DESIGN.md, "The embedded store": one scanning filter is enough to
stall every tenant, since the embedded store answers it under its one lock.)

The same database is grown from the small size to the large one with documents shaped as
the real code leaves them (sent messages, contacts, dispatched events, delivered webhook
deliveries, finished runs, …), and at each size every shape below is timed through the
real functions of mongo/ and ops/ — the scheduler's whole pass job by job (nothing due:
the steady state of every tick), the send step's claims (the lapsed-lease claim of a
redelivered job included) and outcomes, the watchdog's finds and hand-backs, stored
retries, the outbox, webhook lanes, and an API client's time window over its bounces. A
shape whose cost grows with the collection fails.

While it runs, every filter sent to the store is inspected (a PyMongo command listener):
one holding a date-like string — which sends the embedded store's query to the tier that
reads the whole collection, even beside `_id` — is reported by command and collection.

    python -m bench.store_scale                  # 1,000 vs 100,000 (the README's figures)
    python -m bench.store_scale --sizes 1000 20000
    python -m bench.store_scale --off-paths      # the reads left on ISO strings, for the record

`--off-paths` times instead the reads that still filter on an ISO-date string and are on
none of those paths (an operator's `postroom status` and `messages failed --since`), each
beside the same read without the date: what one of them holds the store's lock for as the
collection grows (docs/store-notes.md says why each is left so).

tests/mongo/test_store_scale.py runs the bounded version in the suite."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from pymongo import AsyncMongoClient, monitoring

from mongo import bounces, campaigns, domain_stats, message_search, messages, operations, outbox, suppressions, webhooks
from mongo.indexes import prepare_store
from pipelines.core.clock import in_seconds, ms_of, now_iso, now_ms
from pipelines.messages import delivery_status
from pipelines.messages.delivery_status import NEVER_MS
from pipelines.webhooks.events import plan_deliveries
from pipelines.workflows import message_retention

MAX_RATIO = 2.0
# Below this difference (ms) two timings are the same: the machine's noise (up to ~7 ms on a
# loaded 2-core box, on an empty collection), not a scan (tens of ms per thousand documents).
NOISE_MS = 10.0
SEED_CHUNK = 2_000
WORKSPACE = "ws_scale"


# -- filters with date-like strings --------------------------------------------------------

def _date_like(value) -> bool:
    """What the embedded store takes for a date (neosqlite's own test), so the check
    matches what it does."""
    from neosqlite.collection.datetime_utils import is_datetime_value
    return is_datetime_value(value)


def dated(query) -> bool:
    """True when `query` holds a date-like value where the embedded store looks for one
    (a comparison, an equality, an `$in`), at any depth of `$and`/`$or`/`$nor`/`$not`."""
    if not isinstance(query, dict):
        return False
    for field, value in query.items():
        if field in ("$and", "$or", "$nor"):
            if any(dated(c) for c in value or []):
                return True
        elif field == "$not":
            if dated(value):
                return True
        elif isinstance(value, dict):
            for op, arg in value.items():
                if op in ("$gte", "$gt", "$lte", "$lt", "$eq", "$ne") and _date_like(arg):
                    return True
                if op in ("$in", "$nin") and isinstance(arg, list) and any(_date_like(a) for a in arg):
                    return True
        elif _date_like(value):
            return True
    return False


def filters_of(name: str, command: dict) -> list[dict]:
    if name in ("find", "count", "distinct", "delete", "update", "findAndModify", "aggregate"):
        if name == "find":
            return [command.get("filter") or {}]
        if name in ("count", "distinct", "findAndModify"):
            return [command.get("query") or {}]
        if name == "update":
            return [u.get("q") or {} for u in command.get("updates", [])]
        if name == "delete":
            return [d.get("q") or {} for d in command.get("deletes", [])]
        return [s["$match"] for s in command.get("pipeline", []) if "$match" in s]
    return []


class DatedFilters(monitoring.CommandListener):
    """Every filter with a date-like string sent while registered: (command, collection, filter)."""

    def __init__(self):
        self.found: list[tuple[str, str, dict]] = []

    def started(self, event):
        for query in filters_of(event.command_name, event.command):
            if dated(query):
                self.found.append((event.command_name, str(event.command.get(event.command_name)), query))

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


# -- seeding: documents as the real code leaves them ---------------------------------------

def _sent_message(i: int, at: str) -> dict:
    return messages.watched({
        "_id": f"msg_fill_{i:07d}", "workspace_id": WORKSPACE, "key_id": "key_scale", "kind": "transactional",
        "to": [f"r{i}@example.org"], "subject": "Your order", "status": "sent", "attempts": 1,
        "created_at": at, "updated_at": at, "sent_at": at, "history": [{"status": "queued", "at": at}],
        "lease_token": "", "lease_until": at, "next_attempt_at": "", "tags": [f"t{i % 10}"]})


def _contact(i: int, at: str) -> dict:
    return {"_id": f"ct_fill_{i:07d}", "workspace_id": WORKSPACE, "email": f"c{i}@example.org",
            "email_key": f"c{i}@example.org", "subscribed": True, "bounced": False, "deleted": False,
            "lists": [], "tags": [], "attributes": {"n": i}, "created_at": at, "updated_at": at,
            **outbox.no_events()}


def _event(i: int, at: str) -> dict:
    return outbox._queued({**outbox.event_document(WORKSPACE, "email.delivered", {"n": i}, f"ev_fill_{i:07d}"),
                           "dispatched": True, "automations_pending": False})


def _delivery(i: int, at: str) -> dict:
    event = {"_id": f"ev_fill_{i:07d}", "workspace_id": WORKSPACE, "event": "email.delivered", "timestamp": at,
             "data": {}}
    sub = {"_id": f"wh_fill_{i % 20}", "workspace_id": WORKSPACE, "active": True, "events": ["email.delivered"],
           "created_at": "2000-01-01T00:00:00.000000Z"}
    [doc] = plan_deliveries(event, [sub], at)
    return {**doc, "status": "delivered", "due_ms": NEVER_MS, "lane_due": f"~done~{i:07d}"}


OLD_BOUNCE_AT = "2026-01-01T00:00:00.000000Z"  # a bounce collection is mostly old bounces


def _bounce(i: int, at: str) -> dict:
    return {"_id": f"bn_fill_{i:07d}", "workspace_id": WORKSPACE, "message_id": f"msg_fill_{i:07d}",
            "email": f"r{i}@example.org", "email_key": f"r{i}@example.org", "kind": "bounce",
            "type": "permanent", "category": "unknown_user", "created_at": OLD_BOUNCE_AT,
            "created_ms": ms_of(OLD_BOUNCE_AT)}


def _run(i: int, at: str) -> dict:
    return {"_id": f"run_fill_{i:07d}", "workspace_id": WORKSPACE, "automation_id": "au_fill",
            "contact_id": f"ct_fill_{i:07d}", "status": "completed", "wake_ms": NEVER_MS, "step": None,
            "created_at": at, "updated_at": at, **outbox.no_events()}


def _small(prefix: str, extra: Callable[[int, str], dict]) -> Callable[[int, str], dict]:
    return lambda i, at: {"_id": f"{prefix}_{i:07d}", "workspace_id": WORKSPACE, "created_at": at, **extra(i, at)}


# collection → one filler document of index i, as the real code leaves it once done with it
FILLERS: dict[str, Callable[[int, str], dict]] = {
    "messages": _sent_message,
    "contacts": _contact,
    "outbox": _event,
    "webhook_deliveries": _delivery,
    "automation_runs": _run,
    "bounces": _bounce,
    "activity": _small("act", lambda i, at: {"action": "contact.created", "details": {}, "at": at}),
    "form_signups": _small("su", lambda i, at: {"status": "confirmed", "expires_at": at, "expires_ms": NEVER_MS,
                                                 **outbox.no_events()}),
    "inbound_reports": _small("ir", lambda i, at: {"status": "parsed", "received_at": at, "enqueued_at": at,
                                                    "enqueued_ms": NEVER_MS, "raw": "x" * 200}),
    "idempotency": _small("idem", lambda i, at: {"state": "done", "expires_at": in_seconds(86_400),
                                                  "expires_ms": NEVER_MS - 1, "response": {"status": 202}}),
    "campaigns": _small("cmp", lambda i, at: {"status": "sent", "send_at": at, "send_at_ms": NEVER_MS,
                                               "updated_at": at, "updated_ms": 0, "created_ms": ms_of(at)}),
    "suppressions": _small("sup", lambda i, at: {"email": f"s{i}@example.org", "reason": "manual",
                                                  "created_ms": ms_of(at)}),
    "campaign_parts": _small("cpart", lambda i, at: {"due_ms": NEVER_MS, "contact_ids": []}),
    # a tag on every message (GET /email?tag=): its key, as intake writes it (message_search.insert_keys)
    "message_keys": lambda i, at: {"_id": f"msg_fill_{i:07d}|tag:t{i % 10}", "workspace_id": WORKSPACE,
                                   "key": f"tag:t{i % 10}", "message_id": f"msg_fill_{i:07d}",
                                   "created_ms": ms_of(at), "stream": "transactional", "campaign_id": None},
}


# what the off-path reads (--off-paths) read
OFF_PATH_FILLERS: dict[str, Callable[[int, str], dict]] = {"messages": _sent_message}


async def grow(db, have: int, want: int, fillers: dict[str, Callable[[int, str], dict]] = FILLERS) -> None:
    """Fill every collection of `fillers` from `have` to `want` documents (side by side)."""
    at = now_iso()

    async def fill(collection, make):
        for start in range(have, want, SEED_CHUNK):
            await db[collection].insert_many([make(i, at) for i in range(start, min(want, start + SEED_CHUNK))],
                                             ordered=False)
    await asyncio.gather(*(fill(c, make) for c, make in fillers.items()))


# -- the shapes ----------------------------------------------------------------------------

@dataclasses.dataclass
class Shape:
    """`run(db, settings)` timed after `setup(db)` (untimed, fresh documents each round)."""
    name: str
    run: Callable[..., Awaitable]
    setup: Callable[..., Awaitable] | None = None


BATCH = 50  # messages per send job, as the send path claims them


def _fresh(kind: str) -> list[str]:
    tag = uuid.uuid4().hex[:10]
    return [f"msg_{kind}_{tag}_{n:03d}" for n in range(BATCH)]


def _queued(mid: str, **fields) -> dict:
    at = now_iso()
    return {"_id": mid, "workspace_id": WORKSPACE, "key_id": "key_scale", "kind": "transactional",
            "to": ["x@example.org"], "subject": "s", "status": "queued", "attempts": 0, "created_at": at,
            "updated_at": at, "history": [], "next_attempt_at": "", **fields}


class Work:
    """Per-shape state: the ids a setup made for its run."""
    ids: list[str] = []


def message_shapes() -> list[Shape]:
    work = Work()

    async def born_lapsed(db):  # a redelivered job's messages: born claims whose lease ran out
        work.ids = _fresh("lapsed")
        await messages.insert_many(db, [_queued(m, **delivery_status.born_claim("gone", in_seconds(-60)))
                                        for m in work.ids])

    async def claim_lapsed(db, settings):
        claimed = await messages.claim_for_sending(db, work.ids, uuid.uuid4().hex, 300)
        assert len(claimed) == BATCH, len(claimed)

    async def unclaimed(db):
        work.ids = _fresh("unclaimed")
        await messages.insert_many(db, [_queued(m) for m in work.ids])

    async def claim_unclaimed(db, settings):
        assert len(await messages.claim_for_sending(db, work.ids, uuid.uuid4().hex, 300)) == BATCH

    async def claimed(db):
        await unclaimed(db)
        work.docs = await messages.claim_for_sending(db, work.ids, "tok", 300)

    async def record_delivered(db, settings):
        moved = await messages.apply(db, [delivery_status.forward(m, "delivered", via=("sent",)) for m in work.ids],
                                     held=messages.Held.of(work.docs))
        assert moved == BATCH, moved

    async def retry_later(db, settings):
        await messages.apply(db, [delivery_status.retry(m, "tok", "451 later", next_attempt_at=in_seconds(-1))
                                  for m in work.ids], held=messages.Held.of(work.docs))

    async def lapsed_sending(db):
        await unclaimed(db)
        await messages.claim_for_sending(db, work.ids, "tok", -60)

    async def revive(db, settings):
        found = await messages.lapsed_claims(db, 500)
        await messages.requeue(db, [], [delivery_status.revive(d["_id"], lapsed_before=now_ms()) for d in found])
        assert len(found) >= BATCH

    async def give_up(db, settings):
        done = await messages.apply_each(db, [delivery_status.give_up(m, "gave up", lapsed_before=now_ms())
                                              for m in work.ids])
        assert len(done) == BATCH

    async def stale(db):
        work.ids = _fresh("stale")
        old = in_seconds(-7200)
        await messages.insert_many(db, [_queued(m, updated_at=old) for m in work.ids])

    async def requeue_stale(db, settings):
        found = await messages.stale_queued(db, 3600, 500)
        await messages.requeue(db, [d["_id"] for d in found], [])
        assert len(found) >= BATCH

    async def waiting_retry(db):
        await claimed(db)
        await retry_later(db, None)

    async def take_retries(db, settings):
        taken = [d["_id"] for d in await messages.due_retries(db)
                 if await messages.take_due_retry(db, d["_id"], d["attempts"])]
        assert len(taken) >= BATCH

    async def handoff_failed(db, settings):
        await messages.note_handoff_failed(db, work.ids, "broker down")

    async def scheduled(db):
        work.ids = _fresh("sched")
        await messages.insert_many(db, [_queued(m, status="scheduled", due_at=in_seconds(-1)) for m in work.ids])

    async def promote(db, settings):
        due = await messages.due_scheduled(db)
        moved = [d["_id"] for d in due if await messages.apply(db, [delivery_status.promote(d["_id"])])]
        assert len(moved) >= BATCH

    return [
        Shape("send: claim, born claim lapsed (a redelivered job)", claim_lapsed, born_lapsed),
        Shape("send: claim unclaimed", claim_unclaimed, unclaimed),
        Shape("send: record delivered (held)", record_delivered, claimed),
        Shape("send: SMTP retry waits in store", retry_later, claimed),
        Shape("send: hand-off failed note", handoff_failed, unclaimed),
        Shape("watchdog: lapsed sending found + revived", revive, lapsed_sending),
        Shape("watchdog: give up (lapsed guard)", give_up, lapsed_sending),
        Shape("watchdog: stale queued found + requeued", requeue_stale, stale),
        Shape("scheduler: stored retries taken", take_retries, waiting_retry),
        Shape("scheduler: scheduled promoted", promote, scheduled),
    ]


def outbox_shapes() -> list[Shape]:
    work = Work()

    async def events(db):
        work.events = [outbox.event_document(WORKSPACE, "contact.created", {"n": n}) for n in range(BATCH)]

    async def record_and_dispatch(db, settings):
        await outbox.record_many(db, work.events)
        pending = await outbox.pending(db, 500)
        await outbox.mark_dispatched(db, [e["_id"] for e in pending])
        unread = await outbox.pending_for_automations(db, 500)
        await outbox.mark_read_by_automations(db, [e["_id"] for e in unread])

    async def subscribed(db, settings):
        await outbox.record_many(db, work.events, only_subscribed=True)

    return [Shape("outbox: record, fan-out read, mark dispatched/read", record_and_dispatch, events),
            Shape("outbox: record only subscribed (send path)", subscribed, events)]


def webhook_shapes() -> list[Shape]:
    """Called as mongo/webhooks.py has them (another helper owns that module)."""
    work = Work()

    async def planned(db):
        at = now_iso()
        sub = {"_id": f"wh_{uuid.uuid4().hex[:8]}", "workspace_id": WORKSPACE, "active": True,
               "events": ["email.delivered"], "created_at": "2000-01-01T00:00:00.000000Z"}
        work.sub = sub["_id"]
        work.docs = [d for n in range(BATCH) for d in plan_deliveries(
            {"_id": uuid.uuid4().hex, "workspace_id": WORKSPACE, "event": "email.delivered", "timestamp": at,
             "data": {}}, [sub], at)]

    async def lane_turn(db, settings):
        await webhooks.insert_deliveries(db, work.docs)
        due = await webhooks.due_in_lane(db, work.sub, 100)
        taken = await webhooks.claim(db, work.sub, due, "tok", 30)
        assert len(taken) == BATCH, len(taken)

    return [Shape("webhooks: insert, lane due, claim", lane_turn, planned)]


def scheduler_shapes() -> list[Shape]:
    """Every scheduler job, one shape each, with nothing due: what each tick costs."""
    from ops import scheduler

    def job_shape(job):
        async def run(db, settings):
            await job(db, settings)
        return Shape(f"tick: {job.__name__}", run)
    return [job_shape(job) for job in scheduler.ALL_JOBS]


def api_shapes() -> list[Shape]:
    """API reads that take a time window (the window ranges over an integer field), and
    GET /email's filters, each answered from its index (mongo/message_search.py)."""
    async def recent_bounces(db):
        for n in range(BATCH):
            await bounces.insert(db, {**_bounce(n, ""), "_id": f"bn_{uuid.uuid4().hex}", "created_at": now_iso()})

    async def bounces_of_the_last_hour(db, settings):
        # `until` is exclusive: "now" would leave out a bounce written in this very millisecond
        page, total = await bounces.list_page(db, WORKSPACE, type_=None, kind=None, email=None,
                                              since=in_seconds(-3600), until=in_seconds(60), limit=50, offset=0)
        assert len(page) == min(50, total) and total >= BATCH, (len(page), total)

    def email_page(name: str, filters: message_search.Filters, *, least: int = 0, after: bool = False) -> Shape:
        async def run(db, settings):
            cursor = (now_ms() + 60_000, "msg_~") if after else None  # a cursor page: reads after it
            found = await message_search.list_page(db, WORKSPACE, filters, limit=50, after=cursor)
            assert len(found.items) >= min(least, 50) and found.total >= least, (name, len(found.items), found.total)
        return Shape(f"api: GET /email{name} (a page and its total)", run)

    async def workspace(db):
        await db.workspaces.replace_one({"_id": WORKSPACE}, {"_id": WORKSPACE, "name": "scale"}, upsert=True)

    async def retention(db, settings):
        await message_retention.apply_retention(db, settings)

    async def tomorrows(db):  # a day ahead: the window holds these alone, as an old store's recent hour would
        at = in_seconds(86_400)
        await messages.insert_many(db, [_queued(m, status="sent", created_at=at, updated_at=at)
                                        for m in _fresh("window")])

    async def tagged(db):  # a tag of its own on BATCH new messages (keys written as intake writes them)
        work.tag = f"tag_{uuid.uuid4().hex[:8]}"
        await messages.insert_many(db, [_queued(m, status="sent", tags=[work.tag]) for m in _fresh("tagged")])

    def tag_page(name: str, status: str | None) -> Shape:
        async def run(db, settings):
            found = await message_search.list_page(db, WORKSPACE, message_search.Filters(tag=work.tag, status=status),
                                                   limit=50)
            assert len(found.items) == min(BATCH, 50) and found.total == BATCH, (len(found.items), found.total)
        return Shape(f"api: GET /email{name} (a page and its total)", run, tagged)

    work = Work()
    tomorrow = message_search.Filters(status="sent", since_ms=now_ms() + 82_800_000, until_ms=now_ms() + 90_000_000)
    return [Shape("api: GET /bounces?since=&until= (a page and its total)", bounces_of_the_last_hour, recent_bounces),
            email_page("", message_search.Filters(), least=BATCH),
            email_page("?cursor=", message_search.Filters(), least=BATCH, after=True),
            email_page("?status=failed (none)", message_search.Filters(status="failed")),
            dataclasses.replace(email_page("?status=sent&since=&until=", tomorrow, least=BATCH), setup=tomorrows),
            email_page("?to=", message_search.Filters(to="r7@example.org"), least=1),
            email_page("?stream=marketing (none)", message_search.Filters(stream="marketing")),
            email_page("?campaign_id= (none)", message_search.Filters(campaign_id="cmp_none")),
            tag_page("?tag=", None), tag_page("?tag=&status=", "sent"),
            email_page("?metadata[k]=v (none)", message_search.Filters(metadata=(("k", "v"),))),
            Shape("retention: a pass with nothing old (message bodies and messages)", retention, workspace)]


def console_shapes() -> list[Shape]:
    """The console's pages' reads (front/console/): newest-first pages without a count, a
    campaign's chart, the failed webhook deliveries, the deliverability days."""
    def read(name: str, call: Callable[[object], Awaitable[list]], most: int) -> Shape:
        async def run(db, settings):
            found = await call(db)
            assert len(found) <= most, (name, len(found))
        return Shape(f"console: {name}", run)

    month_ago = now_ms() - 30 * 86_400_000
    return [read("campaigns page", lambda db: campaigns.newest(db, WORKSPACE, None, None, 50), 50),
            read("campaigns page of a status (none)",
                 lambda db: campaigns.newest(db, WORKSPACE, "sending", None, 50), 0),
            read("a campaign's chart (no messages)",
                 lambda db: campaigns.message_histories(db, WORKSPACE, "cmp_x", 2000), 0),
            read("suppressions page",
                 lambda db: suppressions.newest(db, WORKSPACE, reason=None, after=None, limit=50), 50),
            read("failed webhook deliveries (none)", lambda db: webhooks.recent_failures(db, WORKSPACE, 20), 0),
            read("deliverability over 30 days", lambda db: domain_stats.since(db, WORKSPACE, month_ago),
                 domain_stats.MAX_ROWS)]


def all_shapes() -> list[Shape]:
    return message_shapes() + outbox_shapes() + webhook_shapes() + scheduler_shapes() + api_shapes() + console_shapes()


def off_path_shapes() -> list[Shape]:
    """The reads still filtering on an ISO string, each beside the same read without the
    date where there is one, so the table shows what the date itself costs."""
    async def status_last_hour(db, settings):
        await operations.messages_by_status_since(db, in_seconds(-3600))

    async def failed_since(db, settings):
        await operations.failed_messages(db, None, in_seconds(-3600), 50)

    async def status_any_time(db, settings):
        cursor = await db.messages.aggregate([{"$match": {"status": {"$in": ["sent", "failed"]}}},
                                              {"$group": {"_id": "$status", "count": {"$sum": 1}}}])
        await cursor.to_list()

    async def failed_any_time(db, settings):
        await operations.failed_messages(db, None, None, 50)

    return [Shape("postroom status: messages by status, last hour", status_last_hour),
            Shape("the same without the date (status in a list)", status_any_time),
            Shape("postroom messages failed --since 1h", failed_since),
            Shape("postroom messages failed (no --since)", failed_any_time)]


# -- measuring -----------------------------------------------------------------------------

async def time_once(db, settings, shape: Shape) -> float:
    if shape.setup:
        await shape.setup(db)
    start = time.perf_counter()
    await shape.run(db, settings)
    return (time.perf_counter() - start) * 1000


@dataclasses.dataclass
class Result:
    name: str
    ms: list[float]

    @property
    def ratio(self) -> float:
        return self.ms[-1] / max(self.ms[0], 0.1)

    @property
    def flat(self) -> bool:
        return self.ratio <= MAX_RATIO or self.ms[-1] - self.ms[0] < NOISE_MS


def scale_settings(url: str, database: str):
    """Settings for the scheduler's jobs in this process, on the in-process broker (no
    job is due, so none is published; the broker is there for the jobs that look up the
    publisher anyway)."""
    from actors import broker as broker_setup
    from pipelines.core.settings import Settings
    settings = Settings.from_env({"POSTROOM_MONGODB_URL": url, "POSTROOM_MONGODB_DATABASE": database,
                                  "POSTROOM_SECRET_KEY": "scale-" + uuid.uuid4().hex,
                                  "POSTROOM_DATA_DIR": tempfile.mkdtemp(prefix="postroom-scale-")})
    broker_setup.setup(settings)
    return settings


async def measure(url: str, sizes: list[int], *, rounds: int = 3, shapes: list[Shape] | None = None,
                  report: Callable[[str], None] = print, confirm: int = 2,
                  fillers: dict[str, Callable[[int, str], dict]] = FILLERS) -> tuple[list[Result], DatedFilters]:
    """One database per size, grown to it; then every shape timed on each database in
    turn, round after round (the sizes interleaved, so the machine's drift falls on all
    of them alike), after one untimed warm-up each. Returns the median per size of each
    shape and the listener (its `found`: every dated filter sent meanwhile)."""
    dated_filters = DatedFilters()
    name = f"postroom_scale_{uuid.uuid4().hex[:8]}"
    client = AsyncMongoClient(url, event_listeners=[dated_filters])
    dbs = [client[f"{name}_{size}"] for size in sizes]
    settings = scale_settings(url, dbs[0].name)
    shapes = shapes if shapes is not None else all_shapes()
    results = []
    try:
        for db, size in zip(dbs, sizes, strict=True):
            start = time.perf_counter()
            await prepare_store(db)
            await grow(db, 0, size, fillers)
            report(f"-- {size:,} documents per collection seeded in {time.perf_counter() - start:.0f} s")
        async def timed(shape: Shape, rounds: int) -> Result:
            took: list[list[float]] = [[] for _ in sizes]
            for n in range(rounds + 1):
                for i, db in enumerate(dbs):
                    ms = await time_once(db, settings, shape)
                    if n:
                        took[i].append(ms)
            return Result(shape.name, [statistics.median(t) for t in took])

        for shape in shapes:
            result = await timed(shape, rounds)
            # a shape that looks grown is timed again, twice at most, with more rounds: a
            # scan grows every time, a burst of the machine's other work does not
            for _ in range(confirm):
                if result.flat:
                    break
                again = await timed(shape, rounds + 2)
                result = min(result, again, key=lambda r: r.ratio)
            results.append(result)
            report(f"   {' '.join(f'{m:9.2f}' for m in result.ms)} ms  {shape.name}")
    finally:
        for db in dbs:
            await client.drop_database(db.name)
        await client.close()
    return results, dated_filters


def table(results: list[Result], sizes: list[int]) -> str:
    head = " | ".join(f"{s:,} docs" for s in sizes)
    lines = [f"| shape | {head} | ratio |", "|---|" + "---|" * len(sizes) + "---|"]
    for r in results:
        lines.append(f"| {r.name} | " + " | ".join(f"{m:.1f} ms" for m in r.ms)
                     + f" | {r.ratio:.2f}{'' if r.flat else ' **SCAN**'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.store_scale")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mongodb-url", default="", help="a running store (default: start an embedded one)")
    parser.add_argument("--off-paths", action="store_true",
                        help="time the reads left on ISO-string filters instead (operator commands, GET /bounces)")
    args = parser.parse_args()
    shapes, fillers = (off_path_shapes(), OFF_PATH_FILLERS) if args.off_paths else (None, FILLERS)
    process = None
    url = args.mongodb_url
    if not url:
        from ops import embedded_store
        process, url = embedded_store.start(Path(tempfile.mkdtemp(prefix="postroom-scale-store-")))
    try:
        results, dated_filters = asyncio.run(measure(url, args.sizes, rounds=args.rounds, shapes=shapes,
                                                     fillers=fillers))
    finally:
        if process:
            process.terminate()
            process.wait(timeout=10)
    print()
    print(table(results, args.sizes))
    scans = [r.name for r in results if not r.flat]
    print(f"\n{len(results) - len(scans)}/{len(results)} shapes flat (ratio ≤ {MAX_RATIO}, or within {NOISE_MS} ms)")
    for name, collection, query in dated_filters.found[:20]:
        print(f"DATED FILTER: {name} {collection}: {query}")
    print(f"filters with a date-like string: {len(dated_filters.found)}")


if __name__ == "__main__":
    main()
