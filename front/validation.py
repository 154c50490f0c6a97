"""Request parsing. Bodies are validated by pydantic models in strict JSON mode (no
silent coercion of "true" to true) and unknown fields are refused; the first problem is
reported as 400 validation_error with a `path` like `messages[3].to`. The same models
are attached for quart-schema, so the OpenAPI description cannot drift from them."""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from quart import request
from quart_schema import document_querystring, document_request

from pipelines.core.errors import ValidationFailed

from .runtime import runtime, settings
from .types import INT64_MAX, INT64_MIN

M = TypeVar("M", bound=BaseModel)
# On a view taking a JSON body: whether the body may be left out (the OpenAPI document
# marks the others' requestBody required).
BODY_OPTIONAL_ATTRIBUTE = "_postroom_body_optional"


# Parts of a pydantic error location that name a type inside a union, not a field.
_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "is-instance",
              "lax-or-strict", "json-or-python", "tagged-union", "union", "nullable"}


def format_path(loc: tuple) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        text = str(part)
        if "[" in text or text in _TYPE_TAGS or text.startswith(("function-", "constrained-")):
            continue
        path += ("." if path else "") + text
    return path


def _most_specific(errors: list[dict]) -> dict:
    """The first field's error, but from the union branch that got deepest into the value:
    for `to: ["ok@x.org", 5]` the list branch's `to[1]` beats the string branch's `to`."""
    first = errors[0]
    head = tuple(first.get("loc", ()))[:1]
    same_field = [e for e in errors if tuple(e.get("loc", ()))[:1] == head]
    return max(same_field, key=lambda e: len(format_path(tuple(e.get("loc", ())))))


def raise_first(error: ValidationError, prefix: tuple = ()) -> None:
    first = _most_specific(error.errors(include_url=False))
    # a refusal that names a field inside the value it validated (front/email_fields.refused)
    beyond = (first.get("ctx") or {}).get("at") if first["type"] == "refused" else None
    loc = prefix + tuple(first.get("loc", ())) + ((beyond,) if beyond else ())
    path = format_path(loc) or None
    if first["type"] == "json_invalid":
        raise ValidationFailed("Request body is not valid JSON.")
    if first["type"] in ("model_type", "model_attributes_type", "dict_type") and not loc:
        raise ValidationFailed("Request body must be a JSON object.")
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "Unknown field."
    elif first["type"] == "missing":
        message = "Field required."
    raise ValidationFailed(f"{path}: {message}" if path else message, path=path)


async def json_body(allow_empty: bool = False) -> bytes:
    """The raw JSON body; `allow_empty`: no body at all needs no Content-Type either."""
    raw = await request.get_data(as_text=False)
    if allow_empty and not raw.strip():
        return b""
    mimetype = request.mimetype or ""
    if mimetype != "application/json" and not mimetype.endswith("+json"):
        raise ValidationFailed("Content-Type must be application/json.")
    return raw


# What a BSON document can hold: 64-bit integers (types.INT64_*, said in the document) and
# finite doubles. JSON allows more (1e999 parses as infinity, integers are unbounded), which
# failed later in the store as a 500.
# The longest string any field takes, bytes (UTF-8), unless its own limit is lower (most
# are) or the HTML limit is higher: a last bound so no value meets the store's 16 MB
# document limit as a 500. Free-form objects have their own bounds (front/types.JsonObject).
MAX_STRING_BYTES = 1024 * 1024


def _fail(loc: tuple, message: str) -> None:
    path = format_path(loc) or None
    raise ValidationFailed(f"{path}: {message}" if path else message, path=path)


def _refuse_unstorable(value: Any, loc: tuple = (), max_string_bytes: int = MAX_STRING_BYTES) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        if len(value) * 4 > max_string_bytes and len(value.encode()) > max_string_bytes:
            _fail(loc, f"longer than any field takes ({max_string_bytes // 1024} KB).")
        return
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            _fail(loc, "Integer out of range (64-bit).")
    elif isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            _fail(loc, "Number out of range.")
    elif isinstance(value, BaseModel):
        # a model's fields never stored as they came (e.g. a file's base64, bounded by its own rule)
        unstored = getattr(value, "UNSTORED_FIELDS", ())
        for name, item in {**value.__dict__, **(value.model_extra or {})}.items():
            if name not in unstored:
                _refuse_unstorable(item, loc + (name,), max_string_bytes)
    elif isinstance(value, dict):
        for name, item in value.items():
            if "\x00" in name:  # a BSON key is a C string: the store failed on it, a 500
                _fail(loc + (name,), "a key must not contain the NUL character (U+0000).")
            _refuse_unstorable(item, loc + (name,), max_string_bytes)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _refuse_unstorable(item, loc + (index,), max_string_bytes)


def parse_body(model: type[M], raw: bytes, allow_empty: bool = False,
               max_string_bytes: int = MAX_STRING_BYTES) -> M:
    if not raw.strip():
        if not allow_empty:
            raise ValidationFailed("Request body is required.")
        raw = b"{}"
    try:
        parsed = model.model_validate_json(raw, strict=True)
    except ValidationError as error:
        if not _LONE_SURROGATE_ESCAPE.search(raw):
            raise_first(error)
        parsed = _parse_with_lone_surrogates_replaced(model, raw)
    _refuse_unstorable(parsed, max_string_bytes=max_string_bytes)
    return parsed


# An escape of half a UTF-16 pair, `\ud800`: valid JSON text (RFC 8259 allows it) that
# pydantic's parser refuses, and no store can keep (strings are UTF-8). A client's text
# with one (a JavaScript string cut mid-emoji) is kept with U+FFFD in its place, as
# decoding bad UTF-8 does, rather than refused as "not valid JSON".
_LONE_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def _parse_with_lone_surrogates_replaced(model: type[M], raw: bytes) -> M:
    """`raw` parsed by Python's json (which keeps a lone surrogate as a character; a proper
    pair becomes its one character), each lone one replaced, then validated as JSON again
    (strict JSON typing as before)."""
    try:
        document = json.loads(raw)
    except ValueError:
        raise ValidationFailed("Request body is not valid JSON.") from None
    cleaned = json.dumps(_without_surrogates(document), ensure_ascii=False).encode()
    try:
        return model.model_validate_json(cleaned, strict=True)
    except ValidationError as error:
        raise_first(error)


def body(model: type[M], allow_empty: bool = False):
    """Decorator: validate the JSON body into `model`, passed to the view as `data`
    (`allow_empty`: no body at all reads as `{}`)."""
    def decorate(view):
        @document_request(model)
        @functools.wraps(view)
        async def wrapper(*args: Any, **kwargs: Any):
            longest = max(MAX_STRING_BYTES, settings().max_html_bytes)  # html has its own, settable limit
            raw = await json_body(allow_empty)
            # a large body in a parser process: parsing it here would stall every caller
            data = await runtime().body_parsers.run(len(raw), parse_body, model, raw, allow_empty, longest)
            return await view(*args, data=data, **kwargs)
        setattr(wrapper, BODY_OPTIONAL_ATTRIBUTE, allow_empty)
        return wrapper
    return decorate


def query(model: type[M]):
    """Decorator: validate the query string into `model`, passed as `params`. A parameter
    the model knows given twice (`?offset=0&offset=5`) is refused: which one would win is
    a guess. Others are ignored, as unknown parameters are."""
    def decorate(view):
        @document_querystring(model)
        @functools.wraps(view)
        async def wrapper(*args: Any, **kwargs: Any):
            for name in model.model_fields:
                if len(request.args.getlist(name)) > 1:
                    raise ValidationFailed(f"{name}: given more than once.", path=name)
            raw = {k: request.args.get(k) for k in request.args}
            try:
                params = model.model_validate(raw)
            except ValidationError as error:
                raise_first(error)
            return await view(*args, params=params, **kwargs)
        return wrapper
    return decorate
