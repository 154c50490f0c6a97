"""What starts an automation run, and what ends a run's wait, as plain code.

Triggers come from the events the outbox already records (mongo/outbox.py), read once
each by the scheduler (pipelines/workflows/automation_triggers.py): a trigger fires
exactly once per event because a run's id is derived from the automation, the contact and
the event (`run_id`), so reading an event twice inserts nothing new. `api` runs start only through
`POST /automations/:id/trigger`; `date_attribute` runs are started by a daily scheduler
pass (`anniversary_pattern`).

| trigger_type | trigger_config (besides `reentry`) | fired by |
|---|---|---|
| api | — | the trigger endpoint only |
| contact_created | — | contact.created |
| list_joined | list_id (required) | list.member_added of that list |
| tag_added | tag_id (required) | contact.tag_added of that tag |
| email_opened, email_clicked | campaign_id, template_id (optional filters) | email.opened / email.clicked |
| product_viewed | product_id (optional filter) | product.viewed |
| conversion_created | — | conversion.created |
| form_submitted | form_id (required) | form.submitted of that form |
| date_attribute | attribute (required), offset_days (0), time_of_day ("09:00", UTC) | the scheduler, daily |

`reentry` says whether a contact may go through an automation again: `never` (one run
per contact, ever: the default), `after_exit` (again once their previous run ended; the
default for date_attribute, so a birthday flow runs every year), `always` (a run for
every trigger, several at once)."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Callable
from typing import Any

from pipelines.audience import segment_rules
from pipelines.core.errors import ValidationFailed

TRIGGER_TYPES = ("api", "contact_created", "list_joined", "tag_added", "email_opened", "email_clicked",
                 "product_viewed", "conversion_created", "form_submitted", "date_attribute")
REENTRY = ("never", "after_exit", "always")

# Internal outbox events (not in spec §6, never delivered to webhooks) that automations read.
TAG_ADDED_EVENT = "contact.tag_added"
PRODUCT_VIEWED_EVENT = "product.viewed"

# outbox event → the trigger type it fires
EVENT_TRIGGERS = {
    "contact.created": "contact_created",
    "list.member_added": "list_joined",
    TAG_ADDED_EVENT: "tag_added",
    "email.opened": "email_opened",
    "email.clicked": "email_clicked",
    PRODUCT_VIEWED_EVENT: "product_viewed",
    "conversion.created": "conversion_created",
    "form.submitted": "form_submitted",
}
# outbox event → the wait_for_event eventType it ends
WAIT_EVENTS = {
    "email.opened": "email_opened",
    "email.clicked": "email_clicked",
    "conversion.created": "purchase",
    PRODUCT_VIEWED_EVENT: "page_viewed",
}
CONSUMED_EVENTS = frozenset(EVENT_TRIGGERS) | frozenset(WAIT_EVENTS)
# Email events name a message, not a contact: the message says who (and which template).
MESSAGE_EVENTS = ("email.opened", "email.clicked")

_OPTIONAL_ID, _REQUIRED_ID = "optional", "required"
_CONFIG_FIELDS: dict[str, dict[str, str]] = {
    "api": {},
    "contact_created": {},
    "list_joined": {"list_id": _REQUIRED_ID},
    "tag_added": {"tag_id": _REQUIRED_ID},
    "email_opened": {"campaign_id": _OPTIONAL_ID, "template_id": _OPTIONAL_ID},
    "email_clicked": {"campaign_id": _OPTIONAL_ID, "template_id": _OPTIONAL_ID},
    "product_viewed": {"product_id": _OPTIONAL_ID},
    "conversion_created": {},
    "form_submitted": {"form_id": _REQUIRED_ID},
    "date_attribute": {"attribute": "attribute", "offset_days": "offset", "time_of_day": "time"},
}
MAX_OFFSET_DAYS = 365
DEFAULT_TIME_OF_DAY = "09:00"
_TIME_OF_DAY = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


def _fail(path: str, message: str) -> None:
    raise ValidationFailed(f"{path}: {message}", path=path)


def default_reentry(trigger_type: str) -> str:
    return "after_exit" if trigger_type == "date_attribute" else "never"


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= 200


def _is_attribute_name(value: Any) -> bool:
    return isinstance(value, str) and bool(segment_rules.ATTRIBUTE_NAME.match(value))


def _is_offset(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_OFFSET_DAYS


def _is_time_of_day(value: Any) -> bool:
    return isinstance(value, str) and bool(_TIME_OF_DAY.match(value))


_ID_CHECK = (_is_id, "must be an id (a string of 1 to 200 characters).")
# field kind → (whether a value is acceptable, what the 400 says when it is not)
_FIELD_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    _OPTIONAL_ID: _ID_CHECK,
    _REQUIRED_ID: _ID_CHECK,
    "attribute": (_is_attribute_name, "must be a custom attribute name holding a date (YYYY-MM-DD)."),
    "offset": (_is_offset, f"must be a whole number of days from -{MAX_OFFSET_DAYS} to {MAX_OFFSET_DAYS}."),
    "time": (_is_time_of_day, "must be a time of day HH:MM (UTC)."),
}
_REENTRY_CHECK: tuple[Callable[[Any], bool], str] = (lambda value: value in REENTRY,
                                                     f"must be one of {', '.join(REENTRY)}.")
# Field kinds a trigger_config must give.
_REQUIRED_KINDS = (_REQUIRED_ID, "attribute")
_DEFAULT_FIELDS: dict[str, dict[str, Any]] = {
    "date_attribute": {"offset_days": 0, "time_of_day": DEFAULT_TIME_OF_DAY},
}


def _check_field(trigger_type: str, name: str, value: Any, where: str) -> None:
    fields = _CONFIG_FIELDS[trigger_type]
    if name == "reentry":
        acceptable, why = _REENTRY_CHECK
    elif name in fields:
        acceptable, why = _FIELD_CHECKS[fields[name]]
    else:
        takes = ", ".join([*fields, "reentry"])
        _fail(where, f"Unknown field; a {trigger_type} trigger takes {takes}.")
    if not acceptable(value):
        _fail(where, why)


def normalize_trigger_config(trigger_type: str, config: Any, path: str = "trigger_config") -> dict:
    """The complete trigger_config of `trigger_type` (defaults filled), or 400 with a path."""
    if config is None:
        config = {}
    if not isinstance(config, dict):
        _fail(path, "must be an object.")
    out: dict[str, Any] = {"reentry": default_reentry(trigger_type), **_DEFAULT_FIELDS.get(trigger_type, {})}
    for name, value in config.items():
        _check_field(trigger_type, name, value, f"{path}.{name}")
        out[name] = value
    for name, kind in _CONFIG_FIELDS[trigger_type].items():
        if kind in _REQUIRED_KINDS and name not in out:
            _fail(f"{path}.{name}", f"a {trigger_type} trigger needs {name}.")
    return out


def config_schema(trigger_type: str) -> dict:
    """The JSON Schema of `trigger_type`'s trigger_config: what normalize_trigger_config
    accepts, for the API's document (the ids it names are checked against the workspace)."""
    kinds = {_OPTIONAL_ID: {"type": "string", "minLength": 1, "maxLength": 200},
             _REQUIRED_ID: {"type": "string", "minLength": 1, "maxLength": 200},
             "attribute": {"type": "string", "pattern": segment_rules.ATTRIBUTE_NAME.pattern},
             "offset": {"type": "integer", "minimum": -MAX_OFFSET_DAYS, "maximum": MAX_OFFSET_DAYS},
             "time": {"type": "string", "pattern": _TIME_OF_DAY.pattern}}
    fields = _CONFIG_FIELDS[trigger_type]
    return {"type": "object", "additionalProperties": False,
            "properties": {"reentry": {"enum": list(REENTRY)}, **{name: kinds[kind] for name, kind in fields.items()}},
            "required": [name for name, kind in fields.items() if kind in _REQUIRED_KINDS]}


def run_id(automation_id: str, contact_id: str, source: str) -> str:
    """A run's id: the same trigger (source) for the same contact is the same run."""
    digest = hashlib.sha256(f"{automation_id}\x00{contact_id}\x00{source}".encode()).hexdigest()[:32]
    return f"run_{digest}"


def run_source(reentry: str, source: str) -> str:
    """With `never`, every trigger of a contact is the same run: the store refuses the second."""
    return "once" if reentry == "never" else source


# -- events ------------------------------------------------------------------------------------

def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def event_contact(event: dict, message: dict | None = None) -> tuple[str | None, str | None]:
    """(contact id, address) of the contact an event concerns, as far as it says; email
    events say it through their `message` (its contact, else its first recipient)."""
    data, name = event.get("data") or {}, event["event"]
    if name in MESSAGE_EVENTS:
        if message is None:
            return None, None
        return message.get("contact_id"), (message.get("to") or [None])[0]
    if name == "conversion.created":
        return _get(data, "conversion", "contact_id"), _get(data, "conversion", "contact_email")
    if name == PRODUCT_VIEWED_EVENT:
        return data.get("contact_id"), data.get("contact_email")
    contact_id = _get(data, "contact", "id") or data.get("contact_id")
    email = _get(data, "contact", "email") or data.get("email") or data.get("contact_email")
    return contact_id, email


def trigger_matches(automation: dict, event: dict, message: dict | None = None) -> bool:
    """Whether `event` fires `automation` (of the event's trigger type and workspace)."""
    config, data = automation["trigger_config"], event.get("data") or {}
    kind = automation["trigger_type"]
    if kind != EVENT_TRIGGERS.get(event["event"]) or automation["workspace_id"] != event["workspace_id"]:
        return False
    if kind == "list_joined":
        return _get(data, "list", "id") == config["list_id"]
    if kind == "tag_added":
        return _get(data, "tag", "id") == config["tag_id"]
    if kind in ("email_opened", "email_clicked"):
        if config.get("campaign_id") and data.get("campaign_id") != config["campaign_id"]:
            return False
        if config.get("template_id") and (message or {}).get("template_id") != config["template_id"]:
            return False
        return True
    if kind == "product_viewed":
        return not config.get("product_id") or _get(data, "product", "product_id") == config["product_id"]
    if kind == "form_submitted":
        return (_get(data, "form", "id") or data.get("form_id")) == config["form_id"]
    return True


# -- date_attribute ----------------------------------------------------------------------------

def anniversary_pass_due(now: dt.datetime, time_of_day: str) -> bool:
    """Whether today's pass of a date trigger may run: from its time of day (UTC) on."""
    hours, minutes = (int(part) for part in time_of_day.split(":"))
    return (now.hour, now.minute) >= (hours, minutes)


def anniversary_pattern(today: dt.date, offset_days: int) -> str:
    """A `$regex` for stored dates (`YYYY-MM-DD`, optionally followed by a time) whose
    anniversary plus `offset_days` is today: offset -3 fires three days before it. A 29
    February is celebrated on 28 February in years without one."""
    target = today - dt.timedelta(days=offset_days)
    days = [f"{target.month:02d}-{target.day:02d}"]
    if target.month == 2 and target.day == 28 and not _leap(target.year):
        days.append("02-29")
    return r"^\d{4}-(" + "|".join(days) + r")(T|\s|$)"


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
