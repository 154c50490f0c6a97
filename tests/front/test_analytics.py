"""GET /analytics: totals and the daily api_sends series from the per-day counters."""

import datetime as dt
import time

import pytest

from mongo import analytics
from tests.support.api import assert_error


def days_ago(n):
    return (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=n)).isoformat()


def test_totals_and_series_cover_the_period_with_zero_days(service, tenant):
    ws = tenant.workspace_id
    service.store.run(analytics.bump, ws, days_ago(0), sends=3, api_sends=2, campaign_sends=1, delivered=3,
                      opens=2, clicks=1)
    service.store.run(analytics.bump, ws, days_ago(0), api_sends=1, sends=1)
    service.store.run(analytics.bump, ws, days_ago(6), sends=5, api_sends=5, bounces=1)
    service.store.run(analytics.bump, ws, days_ago(40), sends=7, api_sends=7)

    week = tenant.get("/analytics", params={"period": "7d"}).json()["data"]
    assert week["totals"] == {"sends": 9, "campaign_sends": 1, "api_sends": 8, "delivered": 3, "opens": 2,
                              "clicks": 1, "bounces": 1}
    series = week["daily_api_sends"]
    assert [d["date"] for d in series] == [days_ago(n) for n in range(6, -1, -1)]
    assert [d["count"] for d in series] == [5, 0, 0, 0, 0, 0, 3]
    assert (week["from"], week["to"], week["period"]) == (days_ago(6), days_ago(0), "7d")

    default = tenant.get("/analytics").json()["data"]
    assert default["period"] == "30d" and len(default["daily_api_sends"]) == 30
    assert tenant.get("/analytics", params={"period": "90d"}).json()["data"]["totals"]["sends"] == 16
    today = tenant.get("/analytics", params={"period": "1d"}).json()["data"]
    assert today["daily_api_sends"] == [{"date": days_ago(0), "count": 3}]


def test_an_invalid_period_names_the_parameter(tenant):
    for bad in ("2d", "365d", "", "30"):
        response = tenant.get("/analytics", params={"period": bad})
        assert_error(response, 400, "validation_error", "period")


def test_counters_are_per_workspace(service, tenant):
    other = service.tenant()
    service.store.run(analytics.bump, other.workspace_id, days_ago(0), sends=4, api_sends=4)
    assert tenant.get("/analytics", params={"period": "1d"}).json()["data"]["totals"]["sends"] == 0


@pytest.mark.e2e
def test_a_real_send_is_counted(service, tenant):
    tenant.post("/email/send", json={"to": "counted@example.org", "subject": "Hi", "text": "x"})
    service.smtp.wait_for("counted@example.org")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        totals = tenant.get("/analytics", params={"period": "1d"}).json()["data"]["totals"]
        if totals["api_sends"] == 1 and totals["delivered"] == 1:
            break
        time.sleep(0.1)
    assert totals["sends"] == 1 and totals["api_sends"] == 1 and totals["delivered"] == 1
