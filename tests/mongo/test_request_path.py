"""What the front's request path asks the store, made cheap: reads kept for a couple of
seconds (mongo/recent.py) — a change written through this process is seen by its next
read at once — and concurrent adds to one counter (mongo/counters.py), which decide as if
they had gone one by one."""

from __future__ import annotations

import asyncio
import uuid

from mongo import (
    analytics,
    api_keys,
    contacts,
    counters,
    domains,
    grouped_reads,
    message_intake,
    send_limits,
    suppressions,
    workspaces,
)
from pipelines.core.api_keys import hash_key
from pipelines.messages.throttle import DomainLimit


def test_a_key_revoked_through_this_process_is_refused_at_its_next_read(private_db):
    ws = private_db.run(workspaces.create, "Recent")
    key, doc = private_db.run(api_keys.create, ws["_id"], name="k", sandbox=False, permissions=["*"])
    assert not private_db.run(api_keys.recent_by_key, key)["revoked"]
    private_db.run(api_keys.revoke, doc["_id"])
    assert private_db.run(api_keys.recent_by_key, key)["revoked"]


def test_changed_limits_and_settings_are_read_at_once(private_db):
    ws = private_db.run(workspaces.create, "Recent")
    key, doc = private_db.run(api_keys.create, ws["_id"], name="k", sandbox=False, permissions=["*"])
    assert private_db.run(api_keys.recent_by_key, key)["email_rate_limit"] is None
    private_db.run(api_keys.set_limits, doc["_id"], email_rate_limit=7)
    assert private_db.run(api_keys.recent_by_key, key)["email_rate_limit"] == 7
    assert private_db.run(workspaces.recent, ws["_id"])["default_from_email"] is None
    private_db.run(workspaces.update_settings, ws["_id"], {"default_from_email": "a@b.example"})
    assert private_db.run(workspaces.recent, ws["_id"])["default_from_email"] == "a@b.example"


def test_a_domain_added_checked_or_deleted_through_this_process_changes_the_map_at_once(private_db):
    ws_id = str(uuid.uuid4())
    assert private_db.run(domains.verified_map, ws_id) == {}
    domain_id = str(uuid.uuid4())
    assert private_db.run(domains.insert, {"_id": domain_id, "workspace_id": ws_id, "domain": "kept.example",
                                      "verified": False})
    assert private_db.run(domains.verified_map, ws_id) == {"kept.example": False}
    private_db.run(domains.save_check, ws_id, domain_id, records=[], verified=True,
              return_path_host="pr-bounces.kept.example", return_path_verified=True, dmarc={})
    assert private_db.run(domains.verified_map, ws_id) == {"kept.example": True}
    private_db.run(domains.delete, ws_id, domain_id)
    assert private_db.run(domains.verified_map, ws_id) == {}


def test_an_unknown_key_is_not_kept(private_db):
    ws = private_db.run(workspaces.create, "Recent")
    key = "tm_live_" + uuid.uuid4().hex + uuid.uuid4().hex[:11]
    assert private_db.run(api_keys.recent_by_key, key) is None
    # stored afterwards under that very key (as a key created elsewhere would be)
    private_db.run(lambda db: db.api_keys.insert_one({"_id": str(uuid.uuid4()), "workspace_id": ws["_id"],
                                                 "hash": hash_key(key), "revoked": False}))
    assert private_db.run(api_keys.recent_by_key, key) is not None


def test_concurrent_adds_each_see_the_value_right_after_their_own_cost(private_db):
    _id = uuid.uuid4().hex

    async def burst(db):
        return await asyncio.gather(*(counters.add(db, "rate_windows", _id, cost, {}) for cost in (1, 2, 3, 4)))
    assert private_db.run(burst) == [1, 3, 6, 10]
    assert private_db.run(lambda db: db.rate_windows.find_one({"_id": _id}))["n"] == 10
    assert private_db.run(counters.add, "rate_windows", _id, 5, {}) == 15


def test_concurrent_plan_charges_at_the_limit_admit_exactly_the_limit(private_db):
    workspace_id = uuid.uuid4().hex

    async def burst(db):
        return await asyncio.gather(*(send_limits.charge_plan(db, workspace_id, "2026-11", 1, 5) for _ in range(20)))
    assert sum(private_db.run(burst)) == 5
    assert private_db.run(send_limits.plan_used, workspace_id, "2026-11") == 5


def test_concurrent_suppression_lookups_each_get_their_own_addresses_reasons(private_db):
    ws, other = uuid.uuid4().hex, uuid.uuid4().hex
    private_db.run(suppressions.add, ws, "gone@example.org", "hard_bounce")
    private_db.run(suppressions.add, ws, "nope@example.org", "unsubscribed")
    private_db.run(suppressions.add, other, "fine@example.org", "complaint")  # another workspace's list

    async def burst(db):
        asked = [["gone@example.org"], ["fine@example.org", "NOPE@example.org"], ["fine@example.org"],
                 ["Gone@Example.org", "nope@example.org"]] * 5
        return await asyncio.gather(*(suppressions.reasons_among(db, ws, emails) for emails in asked))
    answers = private_db.run(burst)
    assert answers == [{"gone@example.org": "hard_bounce"}, {"NOPE@example.org": "unsubscribed"}, {},
                       {"Gone@Example.org": "hard_bounce", "nope@example.org": "unsubscribed"}] * 5


def test_a_suppression_stored_before_a_lookup_is_asked_is_in_its_answer(private_db):
    """A lookup that joins a group waits for the read that starts after it was asked,
    never for one already in flight."""
    ws = uuid.uuid4().hex

    async def around(db):
        early = asyncio.ensure_future(suppressions.reasons_among(db, ws, ["late@example.org"]))
        await asyncio.sleep(0)  # the first read is on its way
        await suppressions.add(db, ws, "late@example.org", "manual")
        late = await suppressions.reasons_among(db, ws, ["late@example.org"])
        return await early, late
    _early, late = private_db.run(around)
    assert late == {"late@example.org": "manual"}


def _message(ws: str, n: int) -> dict:
    return {"_id": f"{ws}-{n}", "workspace_id": ws, "status": "queued", "to": [f"r{n}@example.org"],
            "created_at": "2026-11-26T00:00:00Z", "updated_at": "2026-11-26T00:00:00Z", "history": []}


def test_concurrent_inserts_are_stored_each_and_a_stored_id_fails_nobody(private_db):
    ws = uuid.uuid4().hex
    private_db.run(message_intake.insert_new, [_message(ws, 0)])  # an earlier attempt's message

    async def burst(db):
        return await asyncio.gather(*(message_intake.insert_new(db, [_message(ws, n), _message(ws, n + 100)])
                                      for n in range(20)), return_exceptions=True)
    assert private_db.run(burst) == [None] * 20
    stored = private_db.run(message_intake.stored_ids, [f"{ws}-{n}" for n in (*range(20), *range(100, 120))])
    assert len(stored) == 40


def test_a_large_insert_goes_in_chunks_and_ids_already_stored_in_any_chunk_fail_nobody(private_db):
    ws = uuid.uuid4().hex
    count = 2 * message_intake.INSERT_CHUNK + 50
    earlier = [_message(ws, n) for n in (3, message_intake.INSERT_CHUNK + 7, count - 1)]
    private_db.run(message_intake.insert_new, earlier)  # an earlier attempt's, spread over the chunks
    private_db.run(message_intake.insert_new, [_message(ws, n) for n in range(count)])
    assert len(private_db.run(message_intake.stored_ids, [f"{ws}-{n}" for n in range(count)])) == count


def test_a_grouped_insert_tells_each_caller_of_its_own_documents_errors_only():
    # the embedded store refuses no single document but a duplicate, so the split is shown
    # on the errors MongoDB would answer: caller 2's second document is refused
    errors = [{"index": 0, "code": 11000}, {"index": 2, "code": 2, "errmsg": "bad"}, {"index": 4, "code": 11000}]
    first, second, third = message_intake.own_write_errors(errors, [1, 3, 1])
    assert first is None and third is None  # ids already present are stored
    assert second.details["writeErrors"] == [{"index": 1, "code": 2, "errmsg": "bad"}]


def test_concurrent_reads_by_value_each_get_the_documents_of_their_own_values(private_db):
    coll = "grouped_" + uuid.uuid4().hex[:8]
    docs = [{"_id": f"d{n}", "kind": "a" if n % 2 else "b", "n": n} for n in range(10)]
    private_db.run(lambda db: db[coll].insert_many(docs))

    async def burst(db):
        asked = [(["d1", "d2", "d3"], None), (["d3", "d9", "nope"], None), ([], None),
                 (["d1", "d2", "d3"], {"kind": "a"}), (["d4"], {"kind": "a"})]
        return await asyncio.gather(*(grouped_reads.find_in(db, coll, "_id", ids, where=where)
                                      for ids, where in asked))
    answers = private_db.run(burst)
    assert [sorted(d["_id"] for d in answer) for answer in answers] == [
        ["d1", "d2", "d3"], ["d3", "d9"], [], ["d1", "d3"], []]  # other filters are never mixed in


def test_contacts_and_limits_are_read_for_each_concurrent_job_alike(private_db):
    ws = uuid.uuid4().hex
    private_db.run(lambda db: db.contacts.insert_many([
        {"_id": f"{ws}-{n}", "workspace_id": ws, "email": f"p{n}@example.org", "email_key": f"p{n}@example.org",
         "deletion_id": ""} for n in range(6)]))
    private_db.run(send_limits.set_domain_limit, f"{ws}.example", rate_per_minute=7, concurrency=2)

    async def jobs(db):
        found = await asyncio.gather(*(contacts.find_by_emails(db, ws, [f"P{n}@example.org", "x@example.org"])
                                       for n in range(6)))
        limits = await asyncio.gather(*(send_limits.load_limits(
            db, [{"to": [f"a@{ws}.example" if n % 2 else "a@other.example"]}], default_key_rate_per_minute=60,
            default_domain=DomainLimit(100, 5)) for n in range(4)))
        return found, limits
    found, limits = private_db.run(jobs)
    assert [list(f) for f in found] == [[f"p{n}@example.org"] for n in range(6)]
    assert [bool(lim.domains) for lim in limits] == [False, True, False, True]
    assert limits[1].domains[f"{ws}.example"] == DomainLimit(7, 2)


def test_concurrent_analytics_bumps_add_up(private_db):
    ws = uuid.uuid4().hex

    async def finishing_jobs(db):
        await asyncio.gather(*(analytics.bump_many(db, {(ws, "2026-11-26"): {"delivered": n, "bounces": 1},
                                                        (ws, "2026-11-27"): {"delivered": 1, "opens": 0}})
                               for n in range(1, 11)))
        return await analytics.daily(db, ws, ["2026-11-26", "2026-11-27"])
    days = private_db.run(finishing_jobs)
    assert days["2026-11-26"]["delivered"] == 55 and days["2026-11-26"]["bounces"] == 10
    assert days["2026-11-27"]["delivered"] == 10 and days["2026-11-27"]["opens"] == 0


def test_an_unknown_counter_fails_its_own_caller_only(private_db):
    ws = uuid.uuid4().hex

    async def both(db):
        return await asyncio.gather(analytics.bump_many(db, {(ws, "2026-11-26"): {"delivered": 1}}),
                                    analytics.bump_many(db, {(ws, "2026-11-26"): {"nonsense": 1}}),
                                    return_exceptions=True)
    fine, refused = private_db.run(both)
    assert fine is None and isinstance(refused, ValueError)
    assert private_db.run(analytics.daily, ws, ["2026-11-26"])["2026-11-26"]["delivered"] == 1
