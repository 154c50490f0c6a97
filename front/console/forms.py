"""Reading a console page's filter form (a GET form: empty fields come as empty strings)
and a posted form, with the API's own models and error messages."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from quart import request

from ..validation import raise_first

M = TypeVar("M", bound=BaseModel)

# A console page lists this many rows at a time (the API's default, 100, is a long page).
PAGE_ROWS = 50


def filters(model: type[M], **defaults: str) -> M:
    """The query string as `model`: fields left empty are not given; 400 (a page saying
    which field and why) when a value is not valid."""
    raw = {**defaults, **{k: v for k, v in request.args.items() if v.strip()}}
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        raise_first(error)
        raise  # raise_first always raises; this tells the type checker so


def shown_filters(*names: str) -> dict[str, str]:
    """The filters as given, to fill the form again and to carry into the next page's link."""
    return {name: request.args.get(name, "") for name in names if request.args.get(name, "").strip()}
