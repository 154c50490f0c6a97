"""Every query and guarded write of the hot paths costs the same at a small and a tenfold
collection (bench/store_scale.py, the bounded version: its full run, 1,000 vs 100,000, is
in the README), and no filter sent on them holds a date-like string, which makes the
embedded store read the whole collection under its one lock, even beside `_id`.

Through the real functions of mongo/ and the scheduler's jobs (and an API client's time
window over its bounces, on integer `created_ms` and counted with `$count`), so a change
that adds a scanning filter on one of these paths fails here."""

from __future__ import annotations

import asyncio

from bench import store_scale
from bench.store_scale import MAX_RATIO, NOISE_MS, dated, measure, table

SIZES = [200, 2_000]  # a scan at ten times the documents costs several times as much


def test_no_filter_of_the_hot_paths_holds_a_date_or_grows_with_the_collection(store_url, monkeypatch):
    monkeypatch.setattr(store_scale, "BATCH", 20)  # messages per send job: a fixed cost, kept small here
    results, dated_filters = asyncio.run(measure(store_url, SIZES, rounds=2, report=lambda line: None))
    assert not dated_filters.found, f"filters with date-like strings: {dated_filters.found[:5]}"
    grown = [r for r in results if not r.flat]
    assert not grown, (f"cost grew with the collection (ratio > {MAX_RATIO} and more than {NOISE_MS} ms):\n"
                       + table(grown, SIZES))


def test_the_check_sees_dates_where_the_embedded_store_does():
    at = "2026-11-28T01:00:00.000000Z"
    assert dated({"_id": "m1", "lease_until": {"$lt": at}})
    assert dated({"$and": [{"status": "queued"}, {"updated_at": at}]})
    assert dated({"expires_at": {"$in": [at]}})
    assert not dated({"_id": "m1", "lease_ms": {"$lt": 1_764_291_600_000}, "next_attempt_at": {"$gt": ""}})
