"""Aggregate analytics from the daily counters (mongo/analytics.py), never from scanning
messages. Days are UTC; a period of N days is today and the N-1 days before it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from quart import Blueprint

from mongo import analytics as analytics_store

from ..responses import one
from ..runtime import caller, db
from ..validation import query

bp = Blueprint("analytics", __name__, url_prefix="/api/v1")

PERIOD_DAYS = {"1d": 1, "7d": 7, "30d": 30, "90d": 90}
TOTALS = ("sends", "campaign_sends", "api_sends", "delivered", "opens", "clicks", "bounces")


class AnalyticsQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")
    period: Literal["1d", "7d", "30d", "90d"] = Field(
        "30d", description="1d (today, UTC), 7d, 30d or 90d: that many UTC days ending today. Default 30d.")


@bp.get("/analytics")
@query(AnalyticsQuery)
async def analytics(params: AnalyticsQuery):
    days = analytics_store.period_days(PERIOD_DAYS[params.period])
    per_day = await analytics_store.daily(db(), caller().workspace_id, days)
    totals = {name: sum(c.get(name, 0) for c in per_day.values()) for name in TOTALS}
    return one({
        "period": params.period,
        "from": days[0],
        "to": days[-1],
        "totals": totals,
        "daily_api_sends": [{"date": d, "count": per_day.get(d, {}).get("api_sends", 0)} for d in days],
    })
