"""The store operations we rely on, as executable facts.

Every test asserts MongoDB's documented behaviour. Where the embedded store (nx-27017)
differs, the test pins nx's actual behaviour in an `if nx:` branch, so the README's
"Store notes" stay true: if nx gets fixed (or regresses) the branch fails and the note
must be revisited. Run against a real MongoDB with POSTROOM_TEST_MONGODB_URL set."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import uuid

import pytest
from pymongo import ReturnDocument, UpdateOne
from pymongo.errors import DuplicateKeyError, OperationFailure

from tests.support.harness import StoreThread


@pytest.fixture(scope="module")
def store(store_url, database_name):
    thread = StoreThread(store_url, f"{database_name}_behaviour")
    yield thread
    thread.close()


@pytest.fixture(scope="module")
def nx(store) -> bool:
    """nx-27017 names itself in buildInfo's `process`; mongod's buildInfo has no such field."""
    async def build_info(db):
        return await db.command("buildInfo")
    return store.run(build_info).get("process") == "nx_27017"


@pytest.fixture
def coll(store):
    """A fresh collection per test, reached through the async driver on the store's loop."""
    name = f"c_{uuid.uuid4().hex[:8]}"
    yield store.db[name]
    store.call(store.db.drop_collection(name))


def run(store, coro):
    return store.call(coro)


async def _ids(cursor_coll, query) -> list:
    return sorted(d["_id"] for d in await cursor_coll.find(query, {"_id": 1}).to_list())


# --- arrays -------------------------------------------------------------------------------

def test_push_of_a_sub_document_appends_it_but_nx_turns_the_array_into_json_strings(store, nx, coll):
    async def go():
        await coll.insert_one({"_id": 1, "history": [{"status": "queued"}]})
        await coll.update_one({"_id": 1}, {"$push": {"history": {"status": "sent"}}})
        return (await coll.find_one({"_id": 1}))["history"]
    history = run(store, go())
    if nx:
        assert history == ['{"status":"queued"}', '{"status":"sent"}']
    else:
        assert history == [{"status": "queued"}, {"status": "sent"}]


def test_add_to_set_of_sub_documents_appends_each_distinct_entry_once(store, coll):
    async def go():
        await coll.insert_one({"_id": 1, "history": [{"status": "queued", "at": "2024-01-01T00:00:00.000000Z"}]})
        entry = {"status": "sent", "at": "2024-01-01T00:00:01.000000Z"}
        await coll.update_one({"_id": 1}, {"$addToSet": {"history": entry}})
        await coll.update_one({"_id": 1}, {"$addToSet": {"history": entry}})
        await coll.update_one({"_id": 1}, {"$addToSet": {"history": {"$each": [
            {"status": "delivered", "at": "2024-01-01T00:00:02.000000Z"},
            {"status": "opened", "at": "2024-01-01T00:00:03.000000Z"}]}}})
        return (await coll.find_one({"_id": 1}))["history"]
    assert [h["status"] for h in run(store, go())] == ["queued", "sent", "delivered", "opened"]


def test_add_to_set_onto_a_missing_field_creates_the_array_but_is_a_silent_no_op_on_nx(store, nx, coll):
    async def go():
        await coll.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 3, "tags": []}])
        await coll.update_one({"_id": 1}, {"$addToSet": {"tags": "vip"}})
        await coll.update_one({"_id": 2}, {"$addToSet": {"history": {"status": "queued"}}})
        await coll.update_one({"_id": 3}, {"$addToSet": {"tags": "vip"}})
        return [await coll.find_one({"_id": i}) for i in (1, 2, 3)]
    missing_str, missing_doc, present = run(store, go())
    assert present["tags"] == ["vip"]  # an array written at insert always works
    if nx:
        assert "tags" not in missing_str
        assert "history" not in missing_doc
    else:
        assert missing_str["tags"] == ["vip"]
        assert missing_doc["history"] == [{"status": "queued"}]


def test_push_and_pull_of_plain_strings_work_even_on_a_missing_field(store, coll):
    async def go():
        await coll.insert_one({"_id": 1, "tags": ["a"]})
        await coll.insert_one({"_id": 2})
        await coll.update_one({"_id": 1}, {"$push": {"tags": "b"}})
        await coll.update_one({"_id": 1}, {"$pull": {"tags": "a"}})
        await coll.update_one({"_id": 2}, {"$push": {"tags": "x"}})
        return (await coll.find_one({"_id": 1}))["tags"], (await coll.find_one({"_id": 2}))["tags"]
    assert run(store, go()) == (["b"], ["x"])


def test_matching_inside_arrays_of_sub_documents(store, coll):
    async def go():
        await coll.insert_many([{"_id": 1, "h": [{"s": "a"}, {"s": "b"}]}, {"_id": 2, "h": [{"s": "c"}]}, {"_id": 3}])
        return (await _ids(coll, {"h": {"$elemMatch": {"s": "b"}}}), await _ids(coll, {"h.s": "b"}))
    assert run(store, go()) == ([1], [1])


def test_dotted_match_skips_arrays_of_strings_but_nx_fails_the_whole_query(store, nx, coll):
    async def go():
        await coll.insert_many([{"_id": 1, "h": [{"s": "b"}]}, {"_id": 2, "h": ["b"]}])
        return await _ids(coll, {"h.s": "b"})
    if nx:
        with pytest.raises(OperationFailure, match="malformed JSON"):
            run(store, go())
    else:
        assert run(store, go()) == [1]


# --- nulls, $ne, $exists, $not ------------------------------------------------------------

@pytest.fixture
def nullable(store, coll):
    store.call(coll.insert_many([{"_id": 1, "v": None}, {"_id": 2, "v": 3}, {"_id": 3}, {"_id": 4, "v": "s"}]))
    return coll


def test_equality_with_null_matches_null_and_missing_fields(store, nullable):
    assert run(store, _ids(nullable, {"v": None})) == [1, 3]


def test_null_inside_or_matches_null_and_missing_but_nx_misses_explicit_nulls(store, nx, nullable):
    found = run(store, _ids(nullable, {"$or": [{"v": None}, {"v": 3}]}))
    assert found == ([2, 3] if nx else [1, 2, 3])


def test_ne_null_excludes_missing_fields_but_nx_includes_them(store, nx, nullable):
    found = run(store, _ids(nullable, {"v": {"$ne": None}}))
    assert found == ([2, 3, 4] if nx else [2, 4])


def test_ne_value_matches_null_and_missing_fields(store, nullable):
    assert run(store, _ids(nullable, {"v": {"$ne": 3}})) == [1, 3, 4]


def test_exists_counts_an_explicit_null_as_present_but_nx_does_not(store, nx, nullable):
    present = run(store, _ids(nullable, {"v": {"$exists": True}}))
    absent = run(store, _ids(nullable, {"v": {"$exists": False}}))
    if nx:
        assert (present, absent) == ([2, 4], [1, 3])
    else:
        assert (present, absent) == ([1, 2, 4], [3])


def test_ne_on_an_array_excludes_arrays_holding_the_value_but_nx_does_not(store, nx, coll):
    async def go():
        await coll.insert_many([{"_id": 1, "t": ["x", "y"]}, {"_id": 2, "t": ["z"]}, {"_id": 3, "t": []}])
        return await _ids(coll, {"t": {"$ne": "x"}})
    assert run(store, go()) == ([1, 2, 3] if nx else [2, 3])


def test_not_operator_negates_but_nx_refuses_it(store, nx, nullable):
    query = {"v": {"$not": {"$gt": 2}}}
    if nx:
        with pytest.raises(OperationFailure, match="not currently implemented"):
            run(store, _ids(nullable, query))
    else:
        assert run(store, _ids(nullable, query)) == [1, 3, 4]


def test_booleans_in_filters_work_everywhere(store, coll):
    async def go():
        await coll.insert_many([{"_id": 1, "revoked": False}, {"_id": 2, "revoked": True}])
        return (await _ids(coll, {"revoked": False}),
                await _ids(coll, {"$or": [{"revoked": False}, {"_id": 2}]}))
    assert run(store, go()) == ([1], [1, 2])


# --- time ---------------------------------------------------------------------------------

def test_iso_string_timestamps_compare_and_sort_chronologically(store, coll):
    from pipelines.core.clock import iso
    base = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    stamps = {i: iso(base + dt.timedelta(hours=h)) for i, h in enumerate([-30, -1, 0, 2, 50], start=1)}

    async def go():
        await coll.insert_many([{"_id": i, "at": s} for i, s in stamps.items()])
        earlier = await _ids(coll, {"at": {"$lt": iso(base)}})
        window = await _ids(coll, {"at": {"$gte": iso(base - dt.timedelta(hours=2)),
                                          "$lt": iso(base + dt.timedelta(hours=3))}})
        ordered = [d["_id"] for d in await coll.find({}, sort=[("at", -1)]).to_list()]
        return earlier, window, ordered
    assert run(store, go()) == ([1, 2], [2, 3, 4], [5, 4, 3, 2, 1])


def test_bson_dates_compare_in_finds_but_nx_aggregates_them_into_strings(store, nx, coll):
    base = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)

    async def go():
        await coll.insert_many([{"_id": i, "at": base + dt.timedelta(days=i)} for i in range(3)])
        later = await _ids(coll, {"at": {"$gt": base}})
        latest = await (await coll.aggregate([{"$group": {"_id": None, "m": {"$max": "$at"}}}])).to_list()
        return later, latest[0]["m"]
    later, latest = run(store, go())
    assert later == [1, 2]
    if nx:
        assert isinstance(latest, str) and "2024-05-03T12:00:00" in latest
    else:
        assert latest == base + dt.timedelta(days=2)



def test_equality_on_a_timestamp_string_is_exact_but_nx_finds_and_updates_within_the_second(store, nx, coll):
    """Why no compare-and-set is guarded by a timestamp (mongo/versions.py): on nx two
    writes that read the same document within one second both passed an `updated_at`
    guard, and one was lost. (The issue that found it saw it at the millisecond; it is
    the whole second: `…56.806999Z`, `…56.807123Z` and `…56Z` all match `…56.806123Z`.)"""
    stored = "2026-11-22T05:08:56.806123Z"
    same_second = ["2026-11-22T05:08:56.806999Z", "2026-11-22T05:08:56.807123Z", "2026-11-22T05:08:56Z"]

    async def go():
        await coll.insert_one({"_id": 1, "updated_at": stored})
        updated, found, counted = [], [], []
        for probe in [*same_second, "2026-11-22T05:08:57.806123Z", stored]:
            guard = {"_id": 1, "updated_at": probe}
            updated.append((await coll.update_one(guard, {"$set": {"x": 1}})).matched_count)
            found.append(int(await coll.find_one(guard) is not None))
            counted.append(await coll.count_documents(guard))
        return updated, found, counted
    updated, found, counted = run(store, go())
    assert counted == [0, 0, 0, 0, 1]
    if nx:
        assert updated == found == [1, 1, 1, 0, 1]
    else:
        assert updated == found == [0, 0, 0, 0, 1]


def test_an_integer_version_guard_lets_exactly_one_of_concurrent_writers_win_each_round(store, coll):
    """The guard we use instead (mongo/versions.py): a document is written with version 0
    and every write adds one."""
    from mongo import versions

    async def go():
        await coll.insert_one({"_id": "legacy", "seen": [], versions.FIELD: 0})
        winners_per_round = []
        for _ in range(5):
            doc = await coll.find_one({"_id": "legacy"})

            async def write(writer: int, doc: dict = doc):
                result = await coll.update_one({"_id": "legacy", **versions.guard(doc)},
                                               versions.bump({"$set": {"last": writer}}))
                return result.matched_count
            results = await asyncio.gather(*(write(w) for w in range(10)))
            winners_per_round.append(sum(results))
        return winners_per_round, (await coll.find_one({"_id": "legacy"}))[versions.FIELD]
    assert run(store, go()) == ([1, 1, 1, 1, 1], 5)


# --- counters -----------------------------------------------------------------------------

def test_flat_inc_on_upsert_creates_the_counter(store, coll):
    async def go():
        await coll.update_one({"_id": "k"}, {"$inc": {"sent": 1}}, upsert=True)
        await coll.update_one({"_id": "k"}, {"$inc": {"sent": 2}}, upsert=True)
        return await coll.find_one({"_id": "k"})
    assert run(store, go()) == {"_id": "k", "sent": 3}


def test_dotted_inc_on_upsert_nests_but_nx_writes_a_literal_dotted_key(store, nx, coll):
    async def go():
        await coll.update_one({"_id": "k"}, {"$inc": {"stats.sent": 1}}, upsert=True)
        return await coll.find_one({"_id": "k"})
    doc = run(store, go())
    if nx:
        assert doc == {"_id": "k", "stats.sent": 1}
    else:
        assert doc == {"_id": "k", "stats": {"sent": 1}}


def test_set_on_insert_fills_an_upserted_counter_but_nx_leaves_it_out_of_find_one_and_update(store, nx, coll):
    """Our counters (mongo/counters.py) upsert with `$setOnInsert`; nothing reads those
    fields back (a plan counter is found by its `_id`, workspace and month)."""
    async def go():
        return await coll.find_one_and_update({"_id": "k"}, {"$inc": {"n": 1}, "$setOnInsert": {"owner": "w"}},
                                              upsert=True, return_document=ReturnDocument.AFTER)
    doc = run(store, go())
    if nx:
        assert doc == {"_id": "k", "n": 1}
    else:
        assert doc == {"_id": "k", "n": 1, "owner": "w"}


# --- comparison, regex, aggregation -------------------------------------------------------

def test_comparisons_bracket_by_type_but_nx_compares_strings_with_numbers(store, nx, coll):
    async def go():
        await coll.insert_many([{"_id": 1, "age": "12"}, {"_id": 2, "age": 20}, {"_id": 3, "age": 10}])
        return await _ids(coll, {"age": {"$gte": 18}})
    assert run(store, go()) == ([1, 2] if nx else [2])


def test_regex_as_an_operator_document_matches_case_insensitively(store, coll):
    async def go():
        await coll.insert_many([{"_id": 1, "name": "Alice"}, {"_id": 2, "name": "bob"}])
        return await _ids(coll, {"name": {"$regex": "ALI", "$options": "i"}})
    assert run(store, go()) == [1]


def test_compiled_pattern_filters_match_but_nx_refuses_them(store, nx, coll):
    run(store, coll.insert_many([{"_id": 1, "name": "Alice"}, {"_id": 2, "name": "bob"}]))
    query = {"name": re.compile("ali", re.I)}
    if nx:
        with pytest.raises(OperationFailure):
            run(store, _ids(coll, query))
    else:
        assert run(store, _ids(coll, query)) == [1]


def test_aggregate_groups_through_the_async_driver(store, coll):
    async def go():
        await coll.insert_many([{"_id": i, "kind": "a" if i % 3 else "b"} for i in range(9)])
        rows = await (await coll.aggregate([{"$group": {"_id": "$kind", "n": {"$sum": 1}}},
                                            {"$sort": {"_id": 1}}])).to_list()
        return [(r["_id"], r["n"]) for r in rows]
    assert run(store, go()) == [("a", 6), ("b", 3)]


# --- uniqueness and exclusive claims ------------------------------------------------------

def test_unique_index_and_duplicate_id_raise_duplicate_key_error(store, coll):
    async def go():
        await coll.create_index("email", unique=True)
        await coll.insert_one({"_id": 1, "email": "a@example.org"})
        errors = []
        for doc in ({"_id": 2, "email": "a@example.org"}, {"_id": 1, "email": "b@example.org"}):
            try:
                await coll.insert_one(doc)
            except DuplicateKeyError as error:
                errors.append(error.code)
        return errors, await coll.count_documents({})
    assert run(store, go()) == ([11000, 11000], 1)


def test_guarded_find_one_and_update_claims_are_exclusive_under_20_concurrent_attempts(store, coll):
    async def go():
        await coll.insert_many([{"_id": f"job{i}", "state": "ready"} for i in range(5)])

        async def claim(worker: int, job: str):
            return await coll.find_one_and_update(
                {"_id": job, "state": "ready"}, {"$set": {"state": "claimed", "by": worker}},
                return_document=ReturnDocument.AFTER)
        outcomes = {}
        for i in range(5):
            results = await asyncio.gather(*(claim(w, f"job{i}") for w in range(20)))
            winners = [r for r in results if r is not None]
            doc = await coll.find_one({"_id": f"job{i}"})
            outcomes[i] = (len(winners), winners[0]["by"] == doc["by"])
        return outcomes
    assert run(store, go()) == {i: (1, True) for i in range(5)}


def test_concurrent_inserts_of_one_id_let_exactly_one_win(store, coll):
    async def go():
        async def insert(n):
            try:
                await coll.insert_one({"_id": "only", "n": n})
                return True
            except DuplicateKeyError:
                return False
        results = await asyncio.gather(*(insert(n) for n in range(20)))
        return results.count(True), await coll.count_documents({})
    assert run(store, go()) == (1, 1)


def test_upserting_replace_keeps_the_filter_id_only_when_the_replacement_has_no_id_on_mongodb(store, nx, coll):
    async def go():
        await coll.find_one_and_replace({"_id": "with"}, {"_id": "with", "x": 1}, upsert=True)
        await coll.find_one_and_replace({"_id": "without"}, {"x": 2}, upsert=True)
        return await coll.find_one({"_id": "with"}), await coll.find_one({"_id": "without"})
    with_id, without_id = run(store, go())
    assert with_id == {"_id": "with", "x": 1}  # so our upserting replaces always carry the _id
    if nx:
        assert without_id is None
    else:
        assert without_id == {"_id": "without", "x": 2}


# --- strings ------------------------------------------------------------------------------

def test_equality_on_a_string_that_starts_like_a_date_matches_but_not_in_nx_find_or_update(store, nx, coll):
    """nx's find and update match "2026-01-02T00:00:00.000Z" and "a|b", but not a string that
    starts with an ISO date and goes on ("…Z|e1"), though its count does: such a value is
    never a guard (the outbox marker's guard is the bare event id, mongo/outbox.py)."""
    values = ["2026-01-02T00:00:00.000Z", "a|b", "2026-01-02T00:00:00.000Z|e1", "2026-01-02 x"]

    async def go():
        await coll.insert_many([{"_id": i, "s": v} for i, v in enumerate(values)])
        found = [int(await coll.find_one({"s": v}) is not None) for v in values]
        updated = [(await coll.update_one({"_id": i, "s": v}, {"$set": {"k": 1}})).matched_count
                   for i, v in enumerate(values)]
        counted = [await coll.count_documents({"s": v}) for v in values]
        return found, updated, counted
    found, updated, counted = run(store, go())
    assert counted == [1, 1, 1, 1]
    if nx:
        assert found == updated == [1, 1, 0, 0]
    else:
        assert found == updated == [1, 1, 1, 1]


def test_ne_an_empty_array_matches_empty_arrays_on_nx_and_size_zero_is_right_on_both(store, nx, coll):
    """How the automation crash test counts runs with no step done (tests/e2e/test_automation_crash.py)."""
    async def go():
        await coll.insert_many([{"_id": 1, "h": []}, {"_id": 2, "h": [{"s": "a"}]}])
        return (await _ids(coll, {"h": {"$ne": []}}), await _ids(coll, {"h": {"$size": 0}}),
                await _ids(coll, {"h.0": {"$exists": True}}))
    not_empty, empty, first_exists = run(store, go())
    assert empty == [1]
    if nx:
        assert (not_empty, first_exists) == ([1, 2], [])
    else:
        assert (not_empty, first_exists) == ([2], [2])


def test_or_in_a_bulk_updates_filters_matches_each_but_nx_modifies_only_the_first(store, nx, coll):
    """A bulk of updates whose filters hold `$or`: each filter matches its document; nx
    counts them all matched but modifies only the first (so guards we bulk are flat
    conditions: delivery_status.not_held picks the one guard each message needs)."""
    async def go():
        await coll.insert_many([{"_id": i, "status": "queued", "tok": "t", "due": 100} for i in range(5)])
        result = await coll.bulk_write(
            [UpdateOne({"_id": i, "status": "queued", "$or": [{"tok": ""}, {"due": {"$gt": 50}}]},
                       {"$set": {"status": "cancelled"}}) for i in range(5)], ordered=False)
        return result.matched_count, await coll.count_documents({"status": "cancelled"})
    matched, modified = run(store, go())
    assert matched == 5
    assert modified == (1 if nx else 5)
