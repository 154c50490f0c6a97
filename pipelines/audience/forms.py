"""Subscription forms as plain code: what a form asks, reading a submission, the texts a
form falls back to, the confirmation email, and the ids and expiry of a signup.

A form asks for an email address (always, required) and the fields it lists: `first_name`,
`last_name` (text) and custom attributes typed `text`, `number`, `boolean` or `date`.
Submissions come from our hosted page or any website's own form (form-encoded: every
value is a string; or JSON: values keep their JSON type), so both are read here the same
way and checked against the field's type; anything else in a submission is ignored.

Abuse guards that live in the submission itself: a honeypot field (`website`, hidden from
people; a bot that fills it gets the usual answer and nothing is recorded) and the form's
signed token (`token`, in the hosted page and in the embed snippet the API hands out)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import html
import math
import re
from collections.abc import Mapping
from typing import Any

from pipelines.audience.addresses import normalize
from pipelines.core.errors import InvalidAnswers
from pipelines.core.targets import InvalidTarget, parse_target

FIELD_TYPES = ("text", "number", "boolean", "date")
STANDARD_FIELDS = {"first_name": "First name", "last_name": "Last name"}
EMAIL_FIELD, TOKEN_FIELD, HONEYPOT_FIELD = "email", "token", "website"
RESERVED_NAMES = (EMAIL_FIELD, TOKEN_FIELD, HONEYPOT_FIELD)
MAX_FIELDS = 20
MAX_LISTS = 20
MAX_TEXT_CHARS = 500   # a text answer
MAX_NAME_CHARS = 100   # first and last name, as on contacts

# An unconfirmed signup (double opt-in) lives this long: its link stops working and the
# scheduler deletes it (the address and answers of someone who never confirmed are not kept).
CONFIRMATION_TTL_SECONDS = 7 * 24 * 3600
# The same address on the same form gets at most one confirmation email this often, so a
# form cannot be used to flood someone's inbox.
RESEND_AFTER_SECONDS = 10 * 60

_TRUE = {"true", "on", "1", "yes"}
_FALSE = {"false", "off", "0", "no", ""}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")

DEFAULT_TEXTS = {
    "submit_label": "Subscribe",
    "thank_you_text": "Thank you: you are subscribed.",
    "confirmation_text": "Almost done: we have sent you an email. Open it and follow the link to confirm "
                         "your subscription.",
    "confirmation_email_subject": "Please confirm your subscription",
    "confirmation_email_text": "Please confirm that you want to receive our emails.",
}


# Characters a redirect URL may not hold even where a URL could. The URL ends up in
# response headers (Location, and its origin in the hosted page's Content-Security-Policy),
# where `;` starts a CSP directive, `,` another policy, and quotes or angle brackets end a
# value; a URL that needs them percent-encodes them (%3B, %2C, %22, …).
_NOT_IN_REDIRECT = frozenset("\"'`;,<>")


def redirect_problem(url: str) -> str | None:
    """Why `url` cannot be a form's redirect URL (completes "the URL …"), or None. Read as
    webhook targets are (pipelines.core.targets: the sending parser, http(s), no white
    space, control characters, backslashes or credentials, a plain host), plus the header
    separators above. Private hosts are fine: the browser follows it, not we."""
    try:
        parse_target(url)
    except InvalidTarget as error:
        return str(error)
    unsafe = sorted(set(url) & _NOT_IN_REDIRECT)
    if unsafe:
        return f"must not contain {' '.join(unsafe)} (percent-encode it)"
    return None


def redirect_of(form: dict, name: str) -> str | None:
    """The form's `redirect_url` or `confirmed_redirect_url` if it may be sent in a
    Location header; None (show our own page) when unset or when it does not pass
    `redirect_problem` (checked when saved; checked again because it goes into a Location
    header)."""
    url = form.get(name)
    return url if url and redirect_problem(url) is None else None


def redirect_origin(form: dict) -> str | None:
    """`scheme://host[:port]` of the form's redirect URL for its page's CSP `form-action`,
    rebuilt from the parsed URL (an ASCII host, a number), never copied from the text, so
    no tenant value can add a directive or a source."""
    url = redirect_of(form, "redirect_url")
    if url is None:
        return None
    target = parse_target(url)
    host = target.raw_host.decode("ascii").lower()
    host = f"[{host}]" if ":" in host else host
    return f"{target.scheme}://{host}" + (f":{target.port}" if target.port is not None else "")


def label_of(field: dict) -> str:
    return field.get("label") or STANDARD_FIELDS.get(field["name"]) or field["name"].replace("_", " ").capitalize()


def effective(form: dict) -> dict:
    """The form with every text that is not set filled from DEFAULT_TEXTS, the title from
    the name, and each field's label."""
    out = dict(form)
    for name, default in DEFAULT_TEXTS.items():
        out[name] = form.get(name) or default
    out["title"] = form.get("title") or form["name"]
    out["fields"] = [{**f, "label": label_of(f), "required": bool(f.get("required"))} for f in form.get("fields", [])]
    out["double_opt_in"] = bool(form.get("double_opt_in"))
    return out


@dataclasses.dataclass
class Submission:
    email: str
    first_name: str | None
    last_name: str | None
    attributes: dict[str, Any]

    @property
    def fields(self) -> dict[str, Any]:
        """What was answered, flat (`first_name`, `last_name`, custom attributes)."""
        named = {"first_name": self.first_name, "last_name": self.last_name}
        return {**{k: v for k, v in named.items() if v is not None}, **self.attributes}


def _typed(field: dict, value: Any) -> Any:
    """`value` as the field's type, or ValueError saying what is expected."""
    kind = field.get("type", "text")
    if kind not in _AS_TYPE:
        raise ValueError(f"has an unknown type {kind!r}")
    return _AS_TYPE[kind](field, value)


def _as_text(field: dict, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be text")
    limit = MAX_NAME_CHARS if field["name"] in STANDARD_FIELDS else MAX_TEXT_CHARS
    value = value.strip()
    if len(value) > limit:
        raise ValueError(f"must be at most {limit} characters")
    return value


def _as_number(field: dict, value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("must be a number")
    if isinstance(value, str):
        text = value.strip()
        if not _NUMBER.match(text):
            raise ValueError("must be a number")
        value = float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("must be a number")
        if value.is_integer() and abs(value) < 2**53:
            value = int(value)
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise ValueError("is out of range")
    return value


def _as_boolean(field: dict, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError("must be yes or no")


def _as_date(field: dict, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a date (YYYY-MM-DD)")
    try:
        return dt.date.fromisoformat(value.strip()).isoformat()
    except ValueError:
        raise ValueError("must be a date (YYYY-MM-DD)") from None


# A form field's `type` → how an answer becomes a value of it.
_AS_TYPE = {"text": _as_text, "number": _as_number, "boolean": _as_boolean, "date": _as_date}


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def read_submission(form: dict, raw: Mapping[str, Any]) -> Submission:
    """The submitted email and answers, typed; InvalidAnswers naming every field that is
    missing or wrong (the first one as its path, all of them in `problems`), so a person
    fixes the form in one go. `raw` maps names to one value each (a string from a form
    post, any JSON value from a JSON post). Fields the form does not ask are ignored; a
    boolean left out (an unticked checkbox) is false."""
    problems: dict[str, str] = {}
    email = ""
    try:
        email = _read_email(raw.get(EMAIL_FIELD))
    except ValueError as error:
        problems[EMAIL_FIELD] = str(error)
    answers: dict[str, Any] = {}
    for field in effective(form)["fields"]:
        try:
            value = _read_answer(field, raw.get(field["name"]))
        except ValueError as error:
            problems[field["name"]] = f"{field['label']}: {error}."
            continue
        if value is not None:
            answers[field["name"]] = value
    if problems:
        raise InvalidAnswers(problems)
    return Submission(email=email, first_name=answers.pop("first_name", None) or None,
                      last_name=answers.pop("last_name", None) or None, attributes=answers)


def _read_email(value: Any) -> str:
    if _blank(value):
        raise ValueError("Enter your email address.")
    try:
        if not isinstance(value, str):
            raise ValueError
        return normalize(value.strip())
    except ValueError:
        raise ValueError("Enter a valid email address, like name@example.com.") from None


def _read_answer(field: dict, value: Any) -> Any:
    """One field's answer typed, None when left blank (and allowed to be); ValueError
    saying what is wrong with it."""
    if field.get("type") == "boolean" and _blank(value):
        value = False if not field["required"] else value
    if _blank(value):
        if field["required"]:
            raise ValueError("this field is required")
        return None
    typed = _typed(field, value)
    if field["required"] and typed is False:
        raise ValueError("this box must be ticked")
    return typed


def signup_id(workspace_id: str, form_id: str, email: str) -> str:
    """One signup per form and address (compared lower-cased): a second submission of the
    same address updates it instead of piling up pending signups."""
    return "signup_" + hashlib.sha256(f"{workspace_id}\x00{form_id}\x00{email.lower()}".encode()).hexdigest()[:32]


def token_payload(workspace_id: str, form_id: str) -> dict:
    """What a form's token signs (pipelines.messages.links, purpose `form`)."""
    return {"w": workspace_id, "f": form_id}


def confirm_payload(workspace_id: str, signup: str, expires_epoch: int) -> dict:
    """What a confirmation link signs (purpose `form_confirm`): the signup and when the
    link stops working."""
    return {"w": workspace_id, "s": signup, "x": expires_epoch}


def confirmation_email(form: dict, confirm_url: str) -> tuple[str, str, str]:
    """(subject, html, text) of the confirmation email: the form's text and a link. The
    form's texts may hold merge tags (checked when the form is saved); the link holds
    none (its token is base64url)."""
    form = effective(form)
    message = html.escape(form["confirmation_email_text"]).replace("\n", "<br>")
    link = html.escape(confirm_url, quote=True)
    body = (
        '<html><body style="margin:0;padding:24px;font-family:Arial,Helvetica,sans-serif;'
        'font-size:16px;line-height:24px;color:#1b1b1f;">'
        f"<p>{message}</p>"
        '<p><a href="' + link + '" style="display:inline-block;padding:12px 20px;background:#3730a3;'
        'color:#ffffff;text-decoration:none;border-radius:6px;font-weight:bold;">Confirm my subscription</a></p>'
        '<p style="font-size:13px;color:#55555f;">If you did not ask for this, ignore this email: '
        "you will not be subscribed.</p>"
        "</body></html>")
    text = (f"{form['confirmation_email_text']}\n\nConfirm your subscription:\n{confirm_url}\n\n"
            "If you did not ask for this, ignore this email: you will not be subscribed.\n")
    return form["confirmation_email_subject"], body, text
