"""Signing in with an API key that has the `console` permission, and signing out. The
sign-in and sign-out are logged on `postroom.console` (workspace and key id, never the
key); every console request is in the access log with its workspace, as the API's are."""

from __future__ import annotations

import datetime as dt
import logging
import secrets

from quart import g, make_response, redirect, request

from pipelines.core.clock import iso
from pipelines.core.errors import Forbidden, Unauthorized
from pipelines.workflows import console_sessions

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


async def _sign_in_form(status: int = 200, problem: str | None = None):
    """The form with a fresh double-submit token, in the form and in its cookie."""
    token = secrets.token_urlsafe(32)
    response = await make_response(*await render("sign_in.html", status, title="Sign in", problem=problem,
                                                 sign_in_csrf=token))
    set_cookie(response, SIGN_IN_COOKIE, token, SIGN_IN_SECONDS)
    return response


@page(bp, "/sign-in", area=None)
async def sign_in_page():
    return await _sign_in_form()


@page(bp, "/sign-in", area=None, methods=("POST",))
async def sign_in():
    form = await request.form
    if not same_token(form.get(CSRF_FIELD), request.cookies.get(SIGN_IN_COOKIE)):
        return await _sign_in_form(403, "The sign-in form expired; enter the key again.")
    try:
        opened = await console_sessions.sign_in_with_key(db(), form.get("key", ""))
    except (Unauthorized, Forbidden) as refused:
        log.info("console sign-in refused: %s", refused.code)
        return await _sign_in_form(refused.status, refused.message)
    session = opened.session
    log.info("console sign-in workspace=%s key=%s", session["workspace_id"], session["key_id"],
             extra={"workspace_id": session["workspace_id"], "key_id": session["key_id"]})
    response = redirect("/console", 303)
    set_cookie(response, SESSION_COOKIE, opened.cookie, console_sessions.SESSION_SECONDS)
    forget_cookie(response, SIGN_IN_COOKIE)
    return response


@page(bp, "/sign-out", area=None, methods=("POST",))
async def sign_out():
    await console_sessions.sign_out(db(), request.cookies.get(SESSION_COOKIE, ""))
    log.info("console sign-out workspace=%s key=%s", g.caller.workspace_id, g.caller.key_id,
             extra={"workspace_id": g.caller.workspace_id, "key_id": g.caller.key_id})
    response = redirect("/console/sign-in", 303)
    forget_cookie(response, SESSION_COOKIE)
    return response


@page(bp, "", area=None)
async def home():
    ends = dt.datetime.fromtimestamp(g.console_session["expires_ms"] / 1000, dt.UTC)
    return await render("home.html", title="Overview", ends_at=iso(ends))
