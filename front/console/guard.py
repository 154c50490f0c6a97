"""What every console request goes through: its session (a cookie naming a stored
session, mongo/console_sessions.py), the CSRF token of every form it posts, the API's
rate limits for the session's key, and the permission its page needs. A console page is
HTML, so what fails answers a page too (errors.html), never the API's JSON envelope.

Routes are declared with `page(...)`: hidden from the OpenAPI document, and naming the
permission area they read or change (a GET needs `<area>:read`, a POST `<area>:write`, as
the API's do). A page of no area (the overview, sign-out) needs only a session."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

from quart import Blueprint, current_app, g, redirect, render_template, request
from quart_schema import hide

from mongo import api_keys as key_store
from mongo import console_sessions, operators
from mongo import workspaces as workspace_store
from pipelines.core import api_keys
from pipelines.core.errors import Forbidden, PostroomError, RateLimited, ServiceUnavailable, Unauthorized
from pipelines.workflows.console_sessions import SESSION_SECONDS, session_id

from .. import auth
from ..runtime import Caller, db, settings

SESSION_COOKIE = "postroom_console"
# The sign-in form's own CSRF token (no session yet): the same random value in a cookie
# and in the form, compared on submit (double submit; the cookie is SameSite=Strict).
SIGN_IN_COOKIE = "postroom_console_sign_in"
SIGN_IN_SECONDS = 3600
CSRF_FIELD = "csrf"
AREA_ATTRIBUTE = "_console_area"
# The area of the operator view's pages: for operator sessions only (and they see only it).
OPERATOR = "operator"
OPEN_ENDPOINTS = {"console.sign_in_page", "console.sign_in", "console.operator_sign_in_page",
                  "console.operator_sign_in"}
# What a session of either kind may reach besides its own pages.
EITHER_SESSION = {"console.sign_out", "console.home", "console.not_found"}

NO_STORE = {"Cache-Control": "no-store, max-age=0", "Pragma": "no-cache"}
PAGE_HEADERS = {**NO_STORE, "Referrer-Policy": "no-referrer", "X-Robots-Tag": "noindex",
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                                           "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"}


def page(bp: Blueprint, rule: str, *, area: str | None, methods: tuple[str, ...] = ("GET",)) -> Callable:
    """Register a console view: hidden from /openapi.yaml, needing `area`'s permission."""
    def register(view):
        setattr(view, AREA_ATTRIBUTE, area)
        bp.route(rule, methods=list(methods))(hide(view))
        return view
    return register


def secure_cookies() -> bool:
    return request.scheme == "https" or settings().base_url.startswith("https://")


def set_cookie(response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, path="/console", httponly=True,
                        secure=secure_cookies(), samesite="Strict")


def forget_cookie(response, name: str) -> None:
    set_cookie(response, name, "", 0)


def same_token(given: str | None, expected: str | None) -> bool:
    return bool(given and expected) and hmac.compare_digest(str(given).encode(), str(expected).encode())


async def render(template: str, status: int = 200, **context):
    context.setdefault("session", g.get("console_session"))
    context.setdefault("caller", g.get("caller"))
    context.setdefault("operator", g.get("operator"))
    return await render_template(f"console/{template}", csrf_field=CSRF_FIELD, **context), status, PAGE_HEADERS


def _needed_area() -> str | None:
    view = current_app.view_functions.get(request.endpoint or "")
    return getattr(view, AREA_ATTRIBUTE, None)


async def _check_csrf(expected: str | None) -> None:
    if request.method in ("GET", "HEAD"):
        return
    form = await request.form
    if not same_token(form.get(CSRF_FIELD), expected):
        raise Forbidden("This form has expired or did not come from the console; reload the page and try again.",
                        code="csrf_failed")


async def _caller_of(session: dict) -> Caller | None:
    """The session's key and workspace, while the key may still sign in."""
    key = await key_store.recent_by_id(db(), session["key_id"])
    if key is None or key.get("revoked") or not api_keys.grants(key.get("permissions") or [], api_keys.CONSOLE):
        return None
    workspace = await workspace_store.recent(db(), session["workspace_id"])
    return None if workspace is None else Caller(key=key, workspace=workspace)


async def _session() -> dict | None:
    cookie = request.cookies.get(SESSION_COOKIE)
    return await console_sessions.live(db(), session_id(cookie)) if cookie else None


async def _signed_in() -> bool:
    """The request's session and who it is (g.console_session, and g.caller or g.operator)."""
    session = await _session()
    if session and session.get("key_id"):
        g.caller = await _caller_of(session)
    elif session and session.get("operator_id"):
        g.operator = await operators.get(db(), session["operator_id"])
    if g.get("caller") is None and g.get("operator") is None:
        return False
    g.console_session = session
    return True


def _check_permission(area: str | None) -> None:
    """An operator session sees the operator view only, a key's session never it; a key's
    page needs its area's permission, as the API's routes do."""
    operator = g.get("operator")
    if request.endpoint in EITHER_SESSION:
        return
    if (operator is not None) != (area == OPERATOR):
        raise Forbidden("This page is for operators only." if area == OPERATOR
                        else "An operator's session shows the operator view only.")
    if operator is None and area:
        needed = f"{area}:{'read' if request.method in ('GET', 'HEAD') else 'write'}"
        if not api_keys.grants(g.caller.key.get("permissions") or [], needed):
            raise Forbidden(f"This API key lacks the '{needed}' permission.")


async def guard():
    """Before every console view (see the module's docstring)."""
    g.console_started = time.perf_counter()
    if request.endpoint in OPEN_ENDPOINTS:
        return None
    area = _needed_area()
    if not await _signed_in():
        if request.method in ("GET", "HEAD"):
            return redirect("/console/operator/sign-in" if area == OPERATOR else "/console/sign-in", 303)
        raise Unauthorized("Your console session has ended; sign in again.")
    if g.get("operator") is not None:
        await auth.check_operator_rate(g.operator["_id"])
    else:
        await auth.check_rate(g.caller)
    await _check_csrf(g.console_session["csrf"])
    _check_permission(area)
    return None


async def failed(error: PostroomError):
    headers = dict(PAGE_HEADERS)
    if isinstance(error, (RateLimited, ServiceUnavailable)):
        headers["Retry-After"] = str(error.retry_after)
    title = _ERROR_TITLES.get(error.status, "Error")
    body, status, _ = await render("error.html", error.status, error=error, title=title)
    return body, status, headers


_ERROR_TITLES = {401: "Signed out", 403: "Not allowed", 404: "Not found", 409: "Not possible now",
                 429: "Too many requests", 503: "Try again shortly"}


def timed(response):
    """Server time of the page, for the browser's devtools and the tests (Server-Timing)."""
    started = g.get("console_started")
    if started is not None:
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
    return response


def install(bp: Blueprint) -> None:
    bp.before_request(guard)
    bp.errorhandler(PostroomError)(failed)
    bp.after_request(timed)


__all__ = ["SESSION_SECONDS", "install", "page", "render"]
