"""Deliverability by destination domain: bounce, complaint and deferral rates over the
last 1, 7 and 30 days (UTC days), from the daily counts per domain
(pipelines/messages/deliverability.py, mongo/domain_stats.py)."""

from __future__ import annotations

from mongo import domain_stats
from pipelines.core.clock import ms_of, utcnow
from pipelines.messages import deliverability

from ..runtime import caller, db
from . import bp
from .guard import page, render

SHOWN_DOMAINS = 100  # the busiest by sent over 30 days


@page(bp, "/deliverability", area="analytics")
async def deliverability_page():
    today_ms = ms_of(utcnow().strftime("%Y-%m-%dT00:00:00Z"))
    longest = max(deliverability.WINDOWS_DAYS)
    rows = await domain_stats.since(db(), caller().workspace_id, today_ms - (longest - 1) * deliverability.DAY_MS)
    domains = deliverability.by_domain(rows, today_ms)
    return await render("deliverability.html", title="Deliverability", domains=domains[:SHOWN_DOMAINS],
                        more=len(domains) > SHOWN_DOMAINS, capped=len(rows) >= domain_stats.MAX_ROWS,
                        windows=deliverability.WINDOWS_DAYS, longest=longest)
