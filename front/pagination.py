"""`limit`/`offset` and the `{data, pagination}` list shape shared by every list endpoint."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from pipelines.core.clock import ms_of
from pipelines.core.errors import ValidationFailed

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
# The store takes a 64-bit skip; a larger offset was a 500. No list comes near this.
MAX_OFFSET = 2**31 - 1
_DIGITS = re.compile(r"[0-9]{1,10}", re.ASCII)


def _digits_only(value: Any) -> Any:
    """A query-string integer is ASCII digits and nothing else: pydantic (like int()) also
    reads " 5", "+5", "1.0", "1_000" and other scripts' digits."""
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        raise ValueError("must be a whole number written with the digits 0-9")
    return value


QueryInt = Annotated[int, BeforeValidator(_digits_only)]


class PageQuery(BaseModel):
    """Base for every list endpoint's query model."""
    model_config = ConfigDict(extra="ignore")
    limit: QueryInt = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT,
                       description="Page size, 1 to 1000 (default 100).")
    offset: QueryInt = Field(0, ge=0, le=MAX_OFFSET, description="Items to skip (default 0, at most 2147483647).")


def page(items: list, *, total: int, limit: int, offset: int) -> dict:
    return {
        "data": items,
        "pagination": {"total": total, "limit": limit, "offset": offset,
                       "has_more": offset + len(items) < total},
    }


def paged(found: tuple[list, int], params: PageQuery, shape: Callable[[Any], Any] | None = None) -> dict:
    """`found` (a page of items and how many match in all, as the store's page queries answer)
    in the list shape, each item through `shape`."""
    items, total = found
    return page([shape(d) for d in items] if shape else items, total=total, limit=params.limit,
                offset=params.offset)


def encode_cursor(position_ms: int, doc_id: str) -> str:
    """A list's `next_cursor`: the last item's integer time and id (GET /email,
    GET /inbound/messages), opaque to clients."""
    return base64.urlsafe_b64encode(f"{position_ms}:{doc_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """`encode_cursor`'s position; ValueError for anything this API did not give."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        position_ms, doc_id = raw.split(":", 1)
        if not position_ms.isdigit() or not doc_id:
            raise ValueError
        return int(position_ms), doc_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValueError("not a cursor this API gave (pass pagination.next_cursor as it is)") from None


def _readable_cursor(value: str) -> str:
    decode_cursor(value)
    return value


class CursorPageQuery(PageQuery):
    """A list that also pages by cursor (newest first), over a [since, until) window:
    GET /email, GET /inbound/messages. Subclasses declare `since`/`until`."""
    cursor: Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_readable_cursor)] \
        | None = Field(None, description="The previous page's `pagination.next_cursor`: the next page, stable "
                                         "while new items arrive (use it instead of a deep offset).")

    def after(self) -> tuple[int, str] | None:
        """The cursor's position; 400 when an offset is given too."""
        if self.cursor and self.offset:
            raise ValidationFailed("offset: give a cursor or an offset, not both.", path="offset")
        return decode_cursor(self.cursor) if self.cursor else None

    def window_ms(self) -> tuple[int | None, int | None]:
        """`since`/`until` as epoch ms; 400 unless until is later than since."""
        since, until = getattr(self, "since", None), getattr(self, "until", None)
        if since and until and since >= until:
            raise ValidationFailed("until: must be later than since.", path="until")
        return (ms_of(since) if since else None), (ms_of(until) if until else None)


def more_after(items: list, total: int, params: CursorPageQuery) -> bool:
    """Whether a next page may hold more. A cursor's page says only whether it was full:
    the total counts every match, not those after it."""
    return len(items) == params.limit and (params.cursor is not None or params.offset + len(items) < total)


def cursor_page(items: list, total: int, params: CursorPageQuery, position: Callable[[Any], tuple[int, str]],
                shape: Callable[[Any], Any]) -> dict:
    """The list shape with `next_cursor` (None on the last page)."""
    more = more_after(items, total, params)
    answer = page([shape(d) for d in items], total=total, limit=params.limit, offset=params.offset)
    answer["pagination"].update(has_more=more, next_cursor=encode_cursor(*position(items[-1])) if items and more
                                else None)
    return answer
