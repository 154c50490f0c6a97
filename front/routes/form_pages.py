"""A form's public side, no API key: the hosted page (`GET /f/<id>`, plain HTML that works
without JavaScript), the submission endpoint any website can post to (`POST /f/<id>`,
form-encoded or multipart from an HTML form, or JSON from a script), and the confirmation
link of a double opt-in email (`GET /f/confirm/<token>`).

Browsers posting a form get pages (or a 303 to the form's redirect URL); a JSON body, or a
client that prefers JSON, gets `{data: {status, message}}` or the error envelope. Scripts on
the form's `allowed_origins` may read those answers (CORS); HTML form posts need no CORS."""

from __future__ import annotations

import json

from quart import Blueprint, g, redirect, render_template, request

from actors.runtime import publisher
from mongo import forms as form_store
from mongo import workspaces as workspace_store
from pipelines.audience import forms
from pipelines.core.errors import InvalidAnswers, NotFound, PostroomError, RateLimited, ValidationFailed
from pipelines.messages import links
from pipelines.workflows import form_signup

from ..errors import error_response
from ..runtime import db, settings
from .pages import PAGE_HEADERS, sender_name

bp = Blueprint("form_pages", __name__, template_folder="../templates")

MAX_SUBMISSION_BYTES = 64 * 1024
CORS_MAX_AGE_SECONDS = 600


def _headers(form: dict | None = None) -> dict:
    """The recipient pages' headers; a form that redirects elsewhere after posting must
    name that origin in form-action, or the browser blocks the redirect."""
    headers = dict(PAGE_HEADERS)
    origin = forms.redirect_origin(form) if form else None
    if origin:
        headers["Content-Security-Policy"] = headers["Content-Security-Policy"].replace(
            "form-action 'self'", f"form-action 'self' {origin}")
    return headers


async def _page(template: str, status: int, of_form: dict | None, **context):
    """A page of `of_form` (None: of no form we know), named after its workspace."""
    workspace = await workspace_store.get(db(), of_form["workspace_id"]) if of_form else None
    context["sender_name"] = sender_name(workspace) if workspace else "Sign-up"
    return await render_template(template, **context), status, _headers(of_form)


async def _form_page(form: dict, status: int = 200, values: dict | None = None, errors: dict | None = None):
    shown = forms.effective(form)
    return await _page("form.html", status, shown, title=shown["title"], form=shown,
                       action=links.form_url("", form["_id"]), token=form_signup.form_token(settings(), form),
                       honeypot=forms.HONEYPOT_FIELD, values=values or {}, errors=errors or {})


async def _done(form: dict | None, heading: str, text: str, status: int = 200, ok: bool = True, headers=None):
    body, status, base = await _page("form_done.html", status, forms.effective(form) if form else None,
                                     title=heading, heading=heading, text=text, ok=ok)
    return body, status, {**base, **(headers or {})}


def _wants_json() -> bool:
    if (request.mimetype or "").endswith("json"):
        return True
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json"


def _allowed_origin(form: dict) -> str | None:
    origin = request.headers.get("Origin")
    return origin if origin and origin.lower() in (form.get("allowed_origins") or []) else None


@bp.after_request
async def _cors(response):
    origin = g.get("form_cors_origin")
    if origin:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Vary"] = "Origin"
    return response


# OPTIONS is the CORS preflight below, not the automatic answer
@bp.get("/f/<form_id>", provide_automatic_options=False)
async def form_page(form_id: str):
    form = await form_store.get_public(db(), form_id)
    if form is None:
        return await _done(None, "Form not found", "This sign-up form does not exist (any more).", 404, ok=False)
    return await _form_page(form)


@bp.route("/f/<form_id>", methods=["OPTIONS"], provide_automatic_options=False)
async def preflight(form_id: str):
    """CORS preflight of a script posting JSON from one of the form's allowed origins."""
    form = await form_store.get_public(db(), form_id)
    origin = _allowed_origin(form) if form else None
    headers = {"Allow": "GET, POST, OPTIONS"}
    if origin:
        headers.update({"Access-Control-Allow-Origin": origin, "Vary": "Origin",
                        "Access-Control-Allow-Methods": "POST",
                        "Access-Control-Allow-Headers": "Content-Type, Accept",
                        "Access-Control-Max-Age": str(CORS_MAX_AGE_SECONDS)})
    return "", 204, headers


async def _submission(as_json: bool) -> dict:
    if (request.content_length or 0) > MAX_SUBMISSION_BYTES:
        raise ValidationFailed(f"A submission is at most {MAX_SUBMISSION_BYTES // 1024} KB.")
    if as_json and (request.mimetype or "").endswith("json"):
        try:
            raw = json.loads(await request.get_data(as_text=False) or b"null")
        except ValueError:
            raise ValidationFailed("Request body is not valid JSON.") from None
        if not isinstance(raw, dict):
            raise ValidationFailed("Request body must be a JSON object.")
        return raw
    return (await request.form).to_dict()


@bp.post("/f/<form_id>", provide_automatic_options=False)
async def submit_form(form_id: str):
    """A submission: `email`, the form's fields by name, `token` (the form's, from its page or
    embed snippet) and the honeypot `website` (left empty), form-encoded or as a JSON object.
    A browser gets a page (or a 303 to the form's redirect_url); JSON gets
    `{data: {status: pending|confirmed, message}}` or the error envelope."""
    as_json = _wants_json()
    form = await form_store.get_public(db(), form_id)
    if form is None:
        if as_json:
            raise NotFound("No such form.")
        return await _done(None, "Form not found", "This sign-up form does not exist (any more).", 404, ok=False)
    g.form_cors_origin = _allowed_origin(form)
    raw: dict = {}
    try:
        raw = await _submission(as_json)
        result = await form_signup.submit(db(), settings(), publisher(), form, raw,
                                          request.remote_addr or "unknown")
    except ValidationFailed as error:
        if as_json:
            raise
        values = {k: v for k, v in raw.items() if k not in (forms.TOKEN_FIELD, forms.HONEYPOT_FIELD)}
        # every wrong answer at once (InvalidAnswers), beside its field; other refusals (the token) alone
        problems = error.problems if isinstance(error, InvalidAnswers) else {error.path or "": error.message}
        return await _form_page(form, 400, values=values, errors=problems)
    except RateLimited as error:
        if as_json:
            raise
        return await _done(form, "Please wait a moment", error.message, 429, ok=False,
                           headers={"Retry-After": str(error.retry_after)})
    except PostroomError:  # the confirmation email could not be accepted (sender, plan limit, broker)
        message = "Your sign-up could not be processed right now. Please try again later."
        if as_json:
            return error_response(503, "internal_error", message)
        return await _done(form, "Something went wrong", message, 503, ok=False)
    shown = forms.effective(form)
    text = shown["confirmation_text"] if result.status == form_store.PENDING else shown["thank_you_text"]
    if as_json:
        return {"data": {"status": result.status, "message": text}}, 200
    target = forms.redirect_of(form, "redirect_url")
    if target:
        return redirect(target, 303)
    heading = "Check your inbox" if result.status == form_store.PENDING else "You are subscribed"
    return await _done(form, heading, text)


@bp.get("/f/confirm/<token>")
async def confirm_signup(token: str):
    """The link of the confirmation email: the address is subscribed (again: harmless)."""
    done = await form_signup.confirm(db(), settings(), token)
    if done.outcome == "confirmed":
        target = forms.redirect_of(done.form, "confirmed_redirect_url")
        if target:
            return redirect(target, 303)
        return await _done(done.form, "Subscription confirmed", forms.effective(done.form)["thank_you_text"])
    if done.outcome == "expired":
        return await _done(done.form, "Link expired", "This confirmation link has expired. Sign up again to "
                           "get a new one.", 410, ok=False)
    return await _done(None, "Link not valid", "This confirmation link is not valid.", 404, ok=False)
