"""The front's access log: one line per request on the `postroom.access` logger, with the
method, the route (the URL rule, `/api/v1/contacts/<contact_id>`, never the raw path: ids
and query strings stay out), the status, the time taken in ms, the caller's workspace id
and a request id. The request id is the client's `X-Request-Id` when it is a short token,
else one we make; the answer carries it back in `X-Request-Id`, so a client's report
and our line meet."""

from __future__ import annotations

import logging
import re
import time
import uuid

from quart import Quart, g, request

log = logging.getLogger("postroom.access")

REQUEST_ID_HEADER = "X-Request-Id"
# What we take from a client as its request id: short, and nothing a log line could mistake
_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def request_id(given: str) -> str:
    """The client's request id when it is one we take, else a new one."""
    return given if _CLIENT_REQUEST_ID.match(given) else uuid.uuid4().hex


def write(method: str, route: str, status: int, ms: float | None, workspace_id: str | None, answered_as: str) -> None:
    """The request's line (`answered_as`: its request id)."""
    fields = {"method": method, "route": route, "status": status, "ms": ms, "workspace_id": workspace_id,
              "request_id": answered_as}
    log.info("%s %s %s %s ms workspace=%s request=%s", method, route, status, ms, workspace_id or "-", answered_as,
             extra=fields)


def install(app: Quart) -> None:
    """Register before the handlers that can answer early (auth), so every request is timed."""
    @app.before_request
    async def _start():
        g.access_started = time.perf_counter()
        g.request_id = request_id(request.headers.get(REQUEST_ID_HEADER, ""))

    @app.after_request
    async def _line(response):
        started = g.get("access_started")
        ms = round((time.perf_counter() - started) * 1000, 1) if started is not None else None
        rule = request.url_rule
        caller = g.get("caller")
        answered_as = g.get("request_id") or request_id(request.headers.get(REQUEST_ID_HEADER, ""))
        response.headers[REQUEST_ID_HEADER] = answered_as
        write(request.method, rule.rule if rule is not None else "unmatched", response.status_code, ms,
              caller.workspace_id if caller is not None else None, answered_as)
        return response
