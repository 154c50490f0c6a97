"""Signing in with an API key that has the `console` permission, and signing out. The
sign-in and sign-out are logged on `postroom.console` (workspace and key id, never the
key); every console request is in the access log with its workspace, as the API's are."""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections.abc import Awaitable, Callable

from quart import g, make_response, redirect, request

from mongo import operators
from pipelines.core.clock import iso
from pipelines.core.errors import Forbidden, NotFound, Unauthorized
from pipelines.workflows import console_sessions

from .. import auth
from ..runtime import db
from . import bp
from .guard import (
    CSRF_FIELD,
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    SIGN_IN_SECONDS,
    forget_cookie,
    page,
    render,
    same_token,
    set_cookie,
)

log = logging.getLogger("postroom.console")
# Sign-in attempts a minute for one operator name, right or wrong.
OPERATOR_ATTEMPTS_PER_MINUTE = 10


async def _sign_in_form(operator: bool, status: int = 200, problem: str | None = None):
    """The form (a key's, or an operator's) with a fresh double-submit token, in the form
    and in its cookie."""
    token = secrets.token_urlsafe(32)
    response = await make_response(*await render("sign_in.html", status, title="Sign in", problem=problem,
                                                 sign_in_csrf=token, for_operator=operator))
    set_cookie(response, SIGN_IN_COOKIE, token, SIGN_IN_SECONDS)
    return response


async def _signed_in(operator: bool, sign_in: Callable[[dict], Awaitable[console_sessions.Opened]]):
    form = await request.form
    if not same_token(form.get(CSRF_FIELD), request.cookies.get(SIGN_IN_COOKIE)):
        return await _sign_in_form(operator, 403, "The sign-in form expired; sign in again.")
    try:
        opened = await sign_in(form)
    except (Unauthorized, Forbidden) as refused:
        log.info("console sign-in refused: %s", refused.code)
        return await _sign_in_form(operator, refused.status, refused.message)
    who = {k: v for k, v in opened.session.items() if k in WHO and v}
    log.info("console sign-in %s", " ".join(f"{k}={v}" for k, v in who.items()), extra=who)
    response = redirect("/console/operator" if operator else "/console", 303)
    set_cookie(response, SESSION_COOKIE, opened.cookie, console_sessions.SESSION_SECONDS)
    forget_cookie(response, SIGN_IN_COOKIE)
    return response


WHO = ("workspace_id", "key_id", "operator_id")


@page(bp, "/sign-in", area=None)
async def sign_in_page():
    return await _sign_in_form(False)


@page(bp, "/sign-in", area=None, methods=("POST",))
async def sign_in():
    return await _signed_in(False, lambda form: console_sessions.sign_in_with_key(db(), form.get("key", "")))


@page(bp, "/operator/sign-in", area=None)
async def operator_sign_in_page():
    return await _sign_in_form(True)


async def _operator(form) -> console_sessions.Opened:
    """Password guesses against one name are limited (429 past OPERATOR_ATTEMPTS_PER_MINUTE)."""
    name = form.get("name", "")
    await auth.check_attempts(f"operator-sign-in:{operators.operator_id(name)}", OPERATOR_ATTEMPTS_PER_MINUTE)
    return await console_sessions.sign_in_operator(db(), name, form.get("password", ""))


@page(bp, "/operator/sign-in", area=None, methods=("POST",))
async def operator_sign_in():
    return await _signed_in(True, _operator)


@page(bp, "/sign-out", area=None, methods=("POST",))
async def sign_out():
    await console_sessions.sign_out(db(), request.cookies.get(SESSION_COOKIE, ""))
    who = {k: v for k, v in g.console_session.items() if k in WHO and v}
    log.info("console sign-out %s", " ".join(f"{k}={v}" for k, v in who.items()), extra=who)
    response = redirect("/console/operator/sign-in" if g.get("operator") else "/console/sign-in", 303)
    forget_cookie(response, SESSION_COOKIE)
    return response


@page(bp, "", area=None)
async def home():
    if g.get("operator") is not None:
        return redirect("/console/operator", 303)
    ends = dt.datetime.fromtimestamp(g.console_session["expires_ms"] / 1000, dt.UTC)
    return await render("home.html", title="Overview", ends_at=iso(ends))


@page(bp, "/<path:unknown>", area=None)
async def not_found(unknown: str):
    """Any other console address: the console's own not-found page (a signed-in person's)."""
    raise NotFound("There is no such page in the console.")
