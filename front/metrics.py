"""Request metrics of the front (prometheus_client): requests by route, method and status,
and a latency histogram by route. The route is the URL rule (`/api/v1/contacts/<contact_id>`),
never the raw path, so labels stay few."""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram
from quart import Quart, g, request

REQUESTS = Counter("postroom_http_requests_total", "HTTP requests by route, method and status",
                   ["route", "method", "status"])
LATENCY = Histogram("postroom_http_request_seconds", "HTTP request latency by route", ["route"],
                    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))


def _route() -> str:
    rule = request.url_rule
    return rule.rule if rule is not None else "unmatched"


def install(app: Quart) -> None:
    @app.before_request
    async def _start_timer():
        g.metrics_started = time.perf_counter()

    @app.after_request
    async def _observe(response):
        observe(_route(), request.method, response.status_code, getattr(g, "metrics_started", None))
        return response


def observe(route: str, method: str, status: int, started: float | None) -> None:
    REQUESTS.labels(route, method, str(status)).inc()
    if started is not None:
        LATENCY.labels(route).observe(time.perf_counter() - started)
