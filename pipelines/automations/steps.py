"""Automation steps as plain code: the step types and their default configs (exactly the
spec's table), config checking with a `path` into the config, what a step needs before its
automation may run, condition evaluation, and which step comes next.

A step is `{id, step_type, config}`; an automation's steps are an ordered list (position =
index, 0-based). A config is stored complete: every field of its type, defaults filled.

| step_type | config (default) |
|---|---|
| email | templateId (null), subject (""), previewText ("") |
| delay | duration (1), unit (days: minutes, hours, days, weeks) |
| condition | field (""), operator (equals: equals, not_equals, contains, gt, lt, gte, lte), value (""), trueBranchStepId (null), falseBranchStepId (null) |
| tag | action (add: add, remove), tagName ("") |
| add_to_list, remove_from_list | listId (null) |
| update_attribute | attributeName (""), attributeValue ("") |
| webhook | url (""), method (POST: GET, POST, PUT, PATCH), headers ({}), body (null) |
| wait_for_event | eventType (email_opened: email_opened, email_clicked, purchase, page_viewed), timeoutDays (7), timeoutAction (continue: continue, skip, branch), timeoutBranchStepId (null) |
| move_to_flow | targetFlowId (""), exitCurrentFlow (true) |

`timeoutBranchStepId` is ours (the spec names a "timeout branch" without a field for it);
`body` has no default in the spec: null sends a JSON description of the run."""  # noqa: E501 (a table, a row a line)

from __future__ import annotations

import copy
import json
import operator
import re
from collections.abc import Callable
from typing import Any

from pipelines.audience import segment_rules
from pipelines.core.errors import ValidationFailed
from pipelines.core.targets import target_problem
from pipelines.templates.merge_compile import compile_template
from pipelines.templates.merge_tags import MergeTagError
from pipelines.templates.merge_tags import parse as parse_merge_tags

STEP_TYPES = ("email", "delay", "condition", "tag", "add_to_list", "remove_from_list",
              "update_attribute", "webhook", "wait_for_event", "move_to_flow")

DEFAULT_CONFIGS: dict[str, dict[str, Any]] = {
    "email": {"templateId": None, "subject": "", "previewText": ""},
    "delay": {"duration": 1, "unit": "days"},
    "condition": {"field": "", "operator": "equals", "value": "", "trueBranchStepId": None,
                  "falseBranchStepId": None},
    "tag": {"action": "add", "tagName": ""},
    "add_to_list": {"listId": None},
    "remove_from_list": {"listId": None},
    "update_attribute": {"attributeName": "", "attributeValue": ""},
    "webhook": {"url": "", "method": "POST", "headers": {}, "body": None},
    "wait_for_event": {"eventType": "email_opened", "timeoutDays": 7, "timeoutAction": "continue",
                       "timeoutBranchStepId": None},
    "move_to_flow": {"targetFlowId": "", "exitCurrentFlow": True},
}

DELAY_UNITS = {"minutes": 60, "hours": 3600, "days": 86400, "weeks": 7 * 86400}
CONDITION_OPERATORS = ("equals", "not_equals", "contains", "gt", "lt", "gte", "lte")
TAG_ACTIONS = ("add", "remove")
WEBHOOK_METHODS = ("GET", "POST", "PUT", "PATCH")
WAIT_EVENT_TYPES = ("email_opened", "email_clicked", "purchase", "page_viewed")
TIMEOUT_ACTIONS = ("continue", "skip", "branch")
# Step config fields naming another step of the same automation.
BRANCH_FIELDS = ("trueBranchStepId", "falseBranchStepId", "timeoutBranchStepId")

MAX_STEPS = 100
MAX_WAIT_SECONDS = 366 * 86400          # a delay or a wait timeout: at most a year
MAX_TEXT = 1000                         # subject, previewText, attribute values, header values
MAX_WEBHOOK_HEADERS = 20
MAX_WEBHOOK_BODY_BYTES = 64 * 1024
STEP_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
# Headers the webhook step sets itself, or that only the transport may set.
RESERVED_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "x-postroom-delivery-id"}


def _fail(path: str, message: str) -> None:
    raise ValidationFailed(f"{path}: {message}", path=path)


def field_path(prefix: str, field: str) -> str:
    """`prefix.field`, or `field` alone for a request body's own fields (prefix "")."""
    return f"{prefix}.{field}" if prefix else field


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- one check per field: (value, path) → the value to store, or raise -----------------------

def _text(max_length: int = MAX_TEXT, *, merge_tags: bool = False) -> Callable:
    def check(value, path):
        if not isinstance(value, str):
            _fail(path, "must be a string.")
        if len(value) > max_length:
            _fail(path, f"must be at most {max_length} characters.")
        if merge_tags:
            _check_merge_tags(value, path)
        return value
    return check


def _optional_id(value, path):
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= 100:
        _fail(path, "must be an id (a string of 1 to 100 characters) or null.")
    return value


def _one_of(choices: tuple[str, ...]) -> Callable:
    def check(value, path):
        if value not in choices:
            _fail(path, f"must be one of {', '.join(choices)}.")
        return value
    return check


def _positive_number(value, path):
    if not _number(value) or value <= 0:
        _fail(path, "must be a number greater than 0.")
    return value


def _boolean(value, path):
    if not isinstance(value, bool):
        _fail(path, "must be true or false.")
    return value


def _scalar(value, path):
    if not (isinstance(value, (str, bool)) or _number(value)):
        _fail(path, "must be a string, a number or a boolean.")
    if isinstance(value, str) and len(value) > MAX_TEXT:
        _fail(path, f"must be at most {MAX_TEXT} characters.")
    return value


def _attribute_name(value, path):
    _text(64)(value, path)
    if value and not segment_rules.ATTRIBUTE_NAME.match(value):
        _fail(path, "attribute names are 1-64 letters, digits, _ or -, starting with a letter, digit or _.")
    return value


def _check_merge_tags(text: str, path: str) -> None:
    try:
        parse_merge_tags(text)
    except MergeTagError as error:
        raise error.at(path) from None


def _url(value, path):
    _text(2048)(value, path)
    if value:
        problem = target_problem(value, allow_private=True)  # shape; the guard checks the target at call time
        if problem:
            _fail(path, f"the URL {problem}.")
    return value


def _headers(value, path):
    if not isinstance(value, dict):
        _fail(path, "must be an object of header names to string values.")
    if len(value) > MAX_WEBHOOK_HEADERS:
        _fail(path, f"at most {MAX_WEBHOOK_HEADERS} headers.")
    for name, header in value.items():
        where = f"{path}.{name}"
        if not _HEADER_NAME.match(name):
            _fail(where, "is not a valid header name.")
        if name.lower() in RESERVED_HEADERS:
            _fail(where, "is set by the service and cannot be given.")
        if not isinstance(header, str) or len(header) > MAX_TEXT:
            _fail(where, f"must be a string of at most {MAX_TEXT} characters.")
        if any(ch in header for ch in "\r\n\x00"):
            _fail(where, "must not contain line breaks.")
    return dict(value)


def _body(value, path):
    if value is None:
        return None
    if not isinstance(value, (dict, str)):
        _fail(path, "must be an object, a string or null.")
    if len(json.dumps(value).encode()) > MAX_WEBHOOK_BODY_BYTES:
        _fail(path, f"must be at most {MAX_WEBHOOK_BODY_BYTES // 1024} KB.")
    for where, text in _strings_in(value, path):
        _check_merge_tags(text, where)
    return copy.deepcopy(value)


def _strings_in(value: Any, path: str):
    """(path, text) of every string in a JSON value: merge tags are filled in each."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings_in(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings_in(item, f"{path}[{index}]")


_FIELD_CHECKS: dict[str, dict[str, Callable]] = {
    "email": {"templateId": _optional_id, "subject": _text(500, merge_tags=True),
              "previewText": _text(500, merge_tags=True)},
    "delay": {"duration": _positive_number, "unit": _one_of(tuple(DELAY_UNITS))},
    "condition": {"field": _text(100), "operator": _one_of(CONDITION_OPERATORS), "value": _scalar,
                  "trueBranchStepId": _optional_id, "falseBranchStepId": _optional_id},
    "tag": {"action": _one_of(TAG_ACTIONS), "tagName": _text(50)},
    "add_to_list": {"listId": _optional_id},
    "remove_from_list": {"listId": _optional_id},
    "update_attribute": {"attributeName": _attribute_name, "attributeValue": _scalar},
    "webhook": {"url": _url, "method": _one_of(WEBHOOK_METHODS), "headers": _headers, "body": _body},
    "wait_for_event": {"eventType": _one_of(WAIT_EVENT_TYPES), "timeoutDays": _positive_number,
                       "timeoutAction": _one_of(TIMEOUT_ACTIONS), "timeoutBranchStepId": _optional_id},
    "move_to_flow": {"targetFlowId": _text(100), "exitCurrentFlow": _boolean},
}


def config_fields(step_type: str) -> tuple[str, ...]:
    """The fields a step type's config takes (any other is refused)."""
    return tuple(_FIELD_CHECKS[step_type])


def normalize_config(step_type: str, config: Any, path: str = "config",
                     base: dict | None = None) -> dict:
    """The complete config of a step: `config`'s fields checked and laid over `base` (the
    step's current config on an update) or the type's defaults. Unknown fields are refused."""
    if step_type not in DEFAULT_CONFIGS:
        raise ValueError(f"unknown step type {step_type!r}")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        _fail(path, "must be an object.")
    checks = _FIELD_CHECKS[step_type]
    out = copy.deepcopy(base if base is not None else DEFAULT_CONFIGS[step_type])
    for name, value in config.items():
        if name not in checks:
            _fail(f"{path}.{name}", f"Unknown field; a {step_type} step takes {', '.join(checks)}.")
        out[name] = checks[name](value, f"{path}.{name}")
    _check_together(step_type, out, path)
    return out


def _check_together(step_type: str, config: dict, path: str) -> None:
    if step_type in ("delay", "wait_for_event"):
        if wait_seconds(step_type, config) > MAX_WAIT_SECONDS:
            field = "duration" if step_type == "delay" else "timeoutDays"
            _fail(f"{path}.{field}", "a wait is at most 366 days.")
    if step_type == "condition" and config["field"]:
        rule = {"field": config["field"], "operator": config["operator"], "value": config["value"]}
        try:
            segment_rules.compile_rule(rule, path)
        except ValidationFailed as error:  # the rule language's own check, with our field names
            raise ValidationFailed(error.message, path=error.path) from None


def wait_seconds(step_type: str, config: dict) -> float:
    """How long a delay waits, or a wait_for_event waits before its timeout action."""
    if step_type == "delay":
        return config["duration"] * DELAY_UNITS[config["unit"]]
    return config["timeoutDays"] * 86400


# What a step must name before its automation may run (an empty config is a fine draft).
_REQUIRED_TO_RUN = {
    "email": (("templateId", "an email step needs a template."), ("subject", "an email step needs a subject.")),
    "condition": (("field", "a condition needs the contact field it looks at."),),
    "tag": (("tagName", "a tag step needs a tag name."),),
    "add_to_list": (("listId", "the step needs a list."),),
    "remove_from_list": (("listId", "the step needs a list."),),
    "update_attribute": (("attributeName", "the step needs an attribute name."),),
    "webhook": (("url", "a webhook step needs a URL."),),
    "move_to_flow": (("targetFlowId", "the step needs a target automation."),),
}


def runnable_problem(step: dict) -> tuple[str, str] | None:
    """(config field, why) when the step is not complete enough to run, else None."""
    config = step["config"]
    for field, why in _REQUIRED_TO_RUN.get(step["step_type"], ()):
        if not config.get(field):
            return field, why
    if step["step_type"] == "wait_for_event" and config["timeoutAction"] == "branch" \
            and not config["timeoutBranchStepId"]:
        return "timeoutBranchStepId", "timeoutAction branch needs the step to branch to."
    return None


def branch_targets(step: dict) -> list[tuple[str, str]]:
    """(config field, step id) of every other step this step may jump to."""
    return [(field, step["config"][field]) for field in BRANCH_FIELDS if step["config"].get(field)]


def check_branches(steps: list[dict], path_of: Callable[[int], str]) -> None:
    """Every branch names another step of these steps; `path_of(i)` is step i's path."""
    ids = {s["id"] for s in steps}
    for index, step in enumerate(steps):
        for field, target in branch_targets(step):
            where = field_path(path_of(index), f"config.{field}")
            if target not in ids:
                _fail(where, f"no step {target!r} in this automation.")
            if target == step["id"]:
                _fail(where, "a step cannot branch to itself.")


# -- running ------------------------------------------------------------------------------------

def position_of(steps: list[dict], step_id: str) -> int | None:
    return next((i for i, s in enumerate(steps) if s["id"] == step_id), None)


def step_after(steps: list[dict], step_id: str, skip: int = 0) -> str | None:
    """The id of the step `1 + skip` places after `step_id`, or None past the end."""
    index = position_of(steps, step_id)
    if index is None:
        return None
    following = index + 1 + skip
    return steps[following]["id"] if following < len(steps) else None


def branch_or_next(steps: list[dict], step_id: str, branch: str | None) -> str | None:
    """A branch target when set (and still a step), else the next step."""
    if branch and position_of(steps, branch) is not None:
        return branch
    return step_after(steps, step_id)


def _contact_value(contact: dict, stored: str) -> Any:
    value: Any = contact
    for key in stored.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _comparable(left: Any, right: Any) -> bool:
    """MongoDB's type bracketing, as segments get it from the store: numbers with numbers,
    strings with strings, booleans with booleans."""
    if _number(left) and _number(right):
        return True
    return type(left) is type(right) and isinstance(left, (str, bool))


def _equal(actual: Any, wanted: Any) -> bool:
    return actual is not None and _comparable(actual, wanted) and actual == wanted


def _contains(actual: Any, wanted: Any) -> bool:
    return isinstance(actual, str) and isinstance(wanted, str) and wanted.lower() in actual.lower()


def _ordered(compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """`gt`…`lte`: only between comparable values, never a boolean (a segment's range
    operators do not order booleans)."""
    def holds(actual: Any, wanted: Any) -> bool:
        if actual is None or not _comparable(actual, wanted) or isinstance(actual, bool):
            return False
        return compare(actual, wanted)
    return holds


# operator → whether it holds between the contact's value and the step's value
_VALUE_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "equals": _equal,
    "not_equals": lambda actual, wanted: not _equal(actual, wanted),  # a missing field is "not equal"
    "contains": _contains,
    "gt": _ordered(operator.gt), "gte": _ordered(operator.ge),
    "lt": _ordered(operator.lt), "lte": _ordered(operator.le),
}
# operator → whether it holds given whether the contact is a member (has the tag, is on the
# list); the range operators never hold on a membership field
_MEMBERSHIP_OPERATORS: dict[str, Callable[[bool], bool]] = {
    "equals": lambda has: has, "contains": lambda has: has, "not_equals": lambda has: not has,
}


def condition_holds(contact: dict, config: dict) -> bool:
    """The condition step's rule on a contact document, with the meaning a segment rule
    has (pipelines.audience.segment_rules): `email` and `contains` compare case-insensitively,
    `not_equals` also holds when the field is missing, membership fields (tags, lists)
    mean "has"; `gt`…`lte` compare numbers with numbers and text with text only."""
    resolved = segment_rules.field_kind(config["field"])
    assert resolved is not None, "a condition step's field is checked when its automation is saved"
    kind, stored = resolved
    operator_name, wanted = config["operator"], config["value"]
    actual = _contact_value(contact, stored)
    if kind == "membership":
        has = wanted in (actual or [])
        return _MEMBERSHIP_OPERATORS.get(operator_name, lambda _has: False)(has)
    if config["field"] == "email" and isinstance(wanted, str):
        wanted = wanted.lower()
    if kind == "boolean" and actual is not None:
        actual = bool(actual)  # the embedded store hands a $set boolean back as 0/1
    return _VALUE_OPERATORS[operator_name](actual, wanted)


# -- the webhook step's request -----------------------------------------------------------------

def _fill(value: Any, data: dict) -> Any:
    """Merge tags filled in every string of a JSON value (text mode: nothing escaped)."""
    if isinstance(value, str):
        return compile_template(value, "text").render(data)
    if isinstance(value, dict):
        return {key: _fill(item, data) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, data) for item in value]
    return value


def webhook_request(config: dict, *, data: dict, default_body: dict,
                    delivery_id: str) -> tuple[bytes | None, dict[str, str]]:
    """(body bytes, headers) of the webhook step. An object body is sent as JSON with merge
    tags filled in its strings; a string body is sent as written (merge tags filled), as
    JSON when it parses as JSON, else as text; no body (null) sends `default_body`. GET
    sends none. `X-Postroom-Delivery-Id` is the same on every attempt: receivers dedupe on it."""
    headers = {"X-Postroom-Delivery-Id": delivery_id, **config["headers"]}
    if config["method"] == "GET":
        return None, headers
    body = config["body"]
    if isinstance(body, str):
        text = _fill(body, data)
        try:
            json.loads(text)
            kind = "application/json"
        except ValueError:
            kind = "text/plain; charset=utf-8"
        payload = text.encode()
    else:
        payload = json.dumps(_fill(body, data) if body is not None else default_body,
                             separators=(",", ":")).encode()
        kind = "application/json"
    if not any(name.lower() == "content-type" for name in headers):
        headers["Content-Type"] = kind
    return payload, headers
