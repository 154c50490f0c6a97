"""Time as the store keeps it. Timestamps are fixed-width UTC ISO-8601 strings
(`2026-11-22T05:08:56.806000Z`): they sort and compare as text the same way in MongoDB
and in the embedded store (which hands BSON dates back as strings), and they are what
the API returns anyway."""

from __future__ import annotations

import datetime as _dt

from pipelines.core.errors import InvalidSchedule

UTC = _dt.UTC


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(UTC)


def iso(moment: _dt.datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    # The year by hand: glibc's %Y does not pad years before 1000 ("95-10-16…"), which
    # breaks the string order these timestamps are compared in.
    return f"{moment.year:04d}" + moment.strftime("-%m-%dT%H:%M:%S.%fZ")


def now_iso() -> str:
    return iso(utcnow())


def parse_iso(text: str) -> _dt.datetime:
    """Parse an ISO-8601 timestamp; a naive one is taken as UTC."""
    value = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def ms_of(text: str) -> int:
    """An ISO-8601 timestamp as integer epoch milliseconds (what the store can range over
    by an index; see pipelines/delivery_status.watch)."""
    return int(parse_iso(text).timestamp() * 1000)


def now_ms() -> int:
    return int(utcnow().timestamp() * 1000)


def ms_in(seconds: float) -> int:
    """Epoch milliseconds `seconds` from now (the integer twin of `in_seconds`): what a
    store filter compares times by (a date-like string in a filter makes the embedded
    store read the whole collection; see mongo/indexes.py)."""
    return now_ms() + int(seconds * 1000)


def in_seconds(seconds: float, start: _dt.datetime | None = None) -> str:
    return iso((start or utcnow()) + _dt.timedelta(seconds=seconds))


def future_within(moment: _dt.datetime, horizon: _dt.timedelta, horizon_text: str, *, path: str) -> _dt.datetime:
    """`moment` (UTC when it names no zone) if it lies in the future and within `horizon`
    from now; else 400 invalid_schedule at `path`."""
    when = moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)
    now = utcnow()
    if when <= now:
        raise InvalidSchedule(f"{path} must be in the future.", path=path)
    if when - now > horizon:
        raise InvalidSchedule(f"{path} must be within {horizon_text} from now.", path=path)
    return when
