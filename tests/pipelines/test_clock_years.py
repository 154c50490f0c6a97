"""Timestamps compare as strings (filters, since < until): every year is written with four
digits, so year 95 sorts before year 2026 (glibc's %Y wrote `95-…`)."""

import datetime as dt

from pipelines.core.clock import iso, parse_iso


def test_early_years_are_padded_so_string_order_is_time_order():
    early = iso(parse_iso("0095-10-15T12:07:37.318157-20:34"))
    assert early == "0095-10-16T08:41:37.318157Z"
    assert early < iso(parse_iso("5517-07-04T20:51:39+18:02")) < iso(dt.datetime(9999, 1, 1))
    assert iso(dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)) == "2026-03-01T12:00:00.000000Z"
