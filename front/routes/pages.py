"""Recipient-facing pages, no API key: open pixel, click redirect, unsubscribe (page and
RFC 8058 one-click POST), preferences. Every link carries a token signed for its purpose
(pipelines/messages/links.py); a token that does not verify answers 404 (the pixel excepted: a
mail client always gets its image, but nothing is recorded). A link of a message with
several recipients names none of them: its pages ask which of the message's addresses is
meant and act on that one only."""

from __future__ import annotations

import base64
import functools

from quart import Blueprint, redirect, render_template, request

from mongo import recipient_pages, suppressions
from pipelines.messages import links
from pipelines.workflows import record_engagement
from pipelines.workflows import unsubscribe as opt_out

from ..runtime import db, settings

bp = Blueprint("pages", __name__, template_folder="../templates")

# The smallest transparent GIF (1×1, 43 bytes).
PIXEL_GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
NO_STORE = {"Cache-Control": "no-store, max-age=0", "Pragma": "no-cache"}
PAGE_HEADERS = {**NO_STORE, "Referrer-Policy": "no-referrer", "X-Robots-Tag": "noindex",
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                           "form-action 'self'; frame-ancestors 'none'"}


def _verify(purpose: str, token: str) -> dict | None:
    return links.verify(purpose, token, settings().secret_key)


async def _page(template: str, status: int = 200, **context):
    context.setdefault("sender_name", "this sender")
    return await render_template(template, **context), status, PAGE_HEADERS


async def _not_found():
    return await _page("not_found.html", 404, title="Link not valid")


def sender_name(workspace: dict) -> str:
    return (workspace.get("settings") or {}).get("company_name") or workspace["name"]


async def _recipient(purpose: str, token: str):
    payload = _verify(purpose, token)
    if payload is None:
        return None
    found = await recipient_pages.recipient(db(), payload)
    if found is None:
        return None
    workspace, contact = found
    email = contact["email"] if contact else payload.get("e") or ""
    return payload, workspace, contact, email


def _preferences_link(payload: dict, contact: dict | None) -> str | None:
    if contact is None and not links.names_message_only(payload):
        return None
    return links.preferences_url(settings().base_url, links.sign("preferences", payload, settings().secret_key))


# --- links of a message with several recipients: the page asks which address is meant ---

async def _choose_address(purpose: str, token: str, payload: dict, workspace: dict, status: int = 200):
    """The message's recipients as radio buttons; 400 when a choice was not one of them."""
    addresses = await recipient_pages.message_recipients(db(), workspace["_id"], payload["m"])
    if not addresses:
        return await _not_found()
    unsubscribing = purpose == "unsubscribe"
    action = (links.unsubscribe_url if unsubscribing else links.preferences_url)("", token)
    return await _page("choose_address.html", status, purpose=purpose, addresses=addresses, action=action,
                       title="Unsubscribe" if unsubscribing else "Email preferences",
                       sender_name=sender_name(workspace), invalid=status == 400,
                       preferences=_preferences_link(payload, None) if unsubscribing else None)


async def _chosen(payload: dict, workspace: dict) -> tuple[dict, dict | None, str] | None:
    """(payload naming the chosen address, its contact or None, the address), or None
    when the form did not pick one of the message's recipients."""
    form = await request.form
    chosen = await opt_out.chosen_recipient(db(), workspace, payload["m"], form.get("email"))
    if chosen is None:
        return None
    contact, email = chosen
    return (links.recipient_payload(workspace["_id"], contact["_id"] if contact else None, email, payload["m"]),
            contact, email)


def _see_other(url: str):
    response = redirect(url, 303)
    response.headers.update(PAGE_HEADERS)
    return response


def _for_recipient(purpose: str):
    """The view runs for the link's recipient (payload, workspace, contact, email); a link
    that does not verify, or whose recipient is gone, gets the not-found page."""
    def wrap(view):
        @functools.wraps(view)
        async def resolved(token: str):
            found = await _recipient(purpose, token)
            if found is None:
                return await _not_found()
            return await view(token, *found)
        return resolved
    return wrap


@bp.get("/u/<token>")
@_for_recipient("unsubscribe")
async def unsubscribe_page(token: str, payload: dict, workspace: dict, contact: dict | None, email: str):
    if links.names_message_only(payload):
        return await _choose_address("unsubscribe", token, payload, workspace)
    suppression = await suppressions.get(db(), workspace["_id"], email)
    return await _page("unsubscribe.html", title="Unsubscribe", sender_name=sender_name(workspace),
                       email=email, action=links.unsubscribe_url("", token),
                       already=opt_out.is_unsubscribed(contact, suppression),
                       preferences=_preferences_link(payload, contact))


@bp.post("/u/<token>")
@_for_recipient("unsubscribe")
async def unsubscribe(token: str, payload: dict, workspace: dict, contact: dict | None, email: str):
    """The page's button and RFC 8058 one-click (`List-Unsubscribe=One-Click`) alike."""
    if links.names_message_only(payload):  # only the address chosen on the page, never all
        chosen = await _chosen(payload, workspace)
        if chosen is None:
            return await _choose_address("unsubscribe", token, payload, workspace, status=400)
        payload, contact, email = chosen
    form = await request.form
    source = "one_click" if form.get("List-Unsubscribe") == "One-Click" else "unsubscribe_page"
    await opt_out.unsubscribe(db(), workspace, contact, email, payload.get("m"), source)
    return await _page("unsubscribed.html", title="Unsubscribed", sender_name=sender_name(workspace),
                       email=email, preferences=_preferences_link(payload, contact))


async def _preferences(token: str, saved: bool):
    found = await _recipient("preferences", token)
    if found is None or found[2] is None:
        return await _not_found()
    _, workspace, contact, email = found
    return await _page("preferences.html", title="Email preferences", sender_name=sender_name(workspace),
                       email=email, subscribed=contact["subscribed"], saved=saved,
                       lists=await recipient_pages.offered_lists(db(), contact),
                       action=links.preferences_url("", token))


@bp.get("/p/<token>")
async def preferences_page(token: str):
    found = await _recipient("preferences", token)
    if found is not None and links.names_message_only(found[0]):
        return await _choose_address("preferences", token, found[0], found[1])
    return await _preferences(token, saved=False)


@bp.post("/p/<token>")
async def save_preferences(token: str):
    found = await _recipient("preferences", token)
    if found is not None and links.names_message_only(found[0]):
        return await _continue_to_address(token, found[0], found[1])
    if found is None or found[2] is None:
        return await _not_found()
    payload, workspace, contact, email = found
    form = await request.form
    await opt_out.save_preferences(db(), workspace, contact, email, payload.get("m"),
                                   subscribed=form.get("subscribed") == "1", chosen_lists=set(form.getlist("list")))
    return await _preferences(token, saved=True)


async def _continue_to_address(token: str, payload: dict, workspace: dict):
    """A message-bound preferences link: on to the chosen address's own preferences (or,
    for an address that is not a contact and so has no lists, its unsubscribe page)."""
    chosen = await _chosen(payload, workspace)
    if chosen is None:
        return await _choose_address("preferences", token, payload, workspace, status=400)
    address_payload, contact, _ = chosen
    secret = settings().secret_key
    if contact is None:
        return _see_other(links.unsubscribe_url("", links.sign("unsubscribe", address_payload, secret)))
    return _see_other(links.preferences_url("", links.sign("preferences", address_payload, secret)))


@bp.get("/t/o/<token>.gif")
async def open_pixel(token: str):
    payload = _verify("open", token)
    if payload is not None and payload.get("w") and payload.get("m"):
        await record_engagement.record_engagement(db(), payload["w"], payload["m"], "open")
    return PIXEL_GIF, 200, {"Content-Type": "image/gif", **NO_STORE}


@bp.get("/t/c/<token>")
async def click(token: str):
    payload = _verify("click", token)
    url = (payload or {}).get("u")
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        return await _not_found()
    if payload.get("w") and payload.get("m"):
        await record_engagement.record_engagement(db(), payload["w"], payload["m"], "click", url)
    return redirect(url, 302)
