"""Contacts as CSV, in and out: the header's column mapping, typed attribute values, rows
checked one by one with their line numbers, and the rows of an export.

Header mapping: `email` (required), `first_name`, `last_name` and `subscribed` are
contact fields; `id`, `bounced`, `tags`, `lists`, `created_at`, `updated_at` and
`unsubscribed_at` (what an export writes) are read-only and ignored; every other column
is an attribute. A column may declare its type as `name:type` (`string`, `number`,
`integer`, `boolean`); undeclared values are inferred: `true`/`false` → boolean, an
integer without a leading zero → integer, a decimal → number, anything else a string
(so zip codes like 01234 stay strings). An empty cell sets nothing.

Formula injection (OWASP "CSV Injection"): a spreadsheet runs a cell that starts with `=`,
`+`, `-`, `@`, TAB or CR as a formula, so an export writes such a cell with a leading `'`
(shown as text) and quotes every cell; a plain number (`-5`, `-1.5`) is no formula and is
written as it is. An import takes that `'` off again, so an export imports back
unchanged."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pipelines.audience.addresses import normalize
from pipelines.audience.segment_rules import ATTRIBUTE_NAME

FIELDS = ("email", "first_name", "last_name", "subscribed")
READ_ONLY = ("id", "bounced", "tags", "lists", "created_at", "updated_at", "unsubscribed_at")
TYPES = ("string", "number", "integer", "boolean")
MAX_ATTRIBUTES = 100
MAX_NAME_LENGTH = 100
EXPORT_FIELDS = ("id", "email", "first_name", "last_name", "subscribed", "bounced", "created_at")

_INTEGER = re.compile(r"^-?(0|[1-9]\d{0,17})$")
_DECIMAL = re.compile(r"^-?(0|[1-9]\d*)\.\d+$")
_TRUE, _FALSE = {"true", "yes"}, {"false", "no"}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def _reads_as_formula(text: str) -> bool:
    """Whether `text` needs the escape quote: it starts with a formula character, or it
    starts with the escape quote itself before such text (so un-escaping is exact)."""
    if text.startswith("'"):
        return _reads_as_formula(text[1:])
    return text.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.match(text)


def neutralised(text: str) -> str:
    """An export cell as a spreadsheet shows it as text, never runs it."""
    return "'" + text if _reads_as_formula(text) else text


def unneutralised(text: str) -> str:
    """An import cell with an export's escape quote taken off."""
    return text[1:] if text.startswith("'") and _reads_as_formula(text[1:]) else text


def export_writer(stream):
    """The csv writer of an export (CLI and API alike): every cell quoted, CRLF lines."""
    return csv.writer(stream, quoting=csv.QUOTE_ALL, lineterminator="\r\n")


class HeaderError(ValueError):
    """The file as a whole cannot be imported (nothing is written)."""


@dataclass(frozen=True)
class Column:
    name: str             # the contact field or attribute name
    kind: str             # "field", "attribute" or "ignored"
    type: str | None = None  # declared attribute type, None: inferred


@dataclass
class ContactRow:
    line: int
    email: str
    fields: dict = field(default_factory=dict)       # first_name / last_name / subscribed given
    attributes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RowError:
    line: int
    message: str
    email: str | None = None


def read_header(names: list[str]) -> list[Column]:
    columns, seen = [], set()
    for raw in names:
        name, _, spelled = raw.strip().partition(":")
        name, declared = name.strip(), spelled.strip().lower() or None
        key = name.lower()
        if key in FIELDS:
            column = Column(key, "field")
        elif key in READ_ONLY:
            column = Column(key, "ignored")
        elif not ATTRIBUTE_NAME.match(name):
            raise HeaderError(f"column {raw!r}: attribute names are 1-64 letters, digits, _ or -, "
                              "starting with a letter, digit or _")
        elif declared is not None and declared not in TYPES:
            raise HeaderError(f"column {raw!r}: unknown type {declared!r} (one of {', '.join(TYPES)})")
        else:
            column = Column(name, "attribute", declared)
        if column.name in seen:
            raise HeaderError(f"column {name!r} appears twice")
        seen.add(column.name)
        columns.append(column)
    if "email" not in seen:
        raise HeaderError("the header has no email column")
    if sum(c.kind == "attribute" for c in columns) > MAX_ATTRIBUTES:
        raise HeaderError(f"more than {MAX_ATTRIBUTES} attribute columns")
    return columns


def typed(text: str, declared: str | None):
    """The attribute value of a cell; ValueError when it is not of its declared type."""
    lowered = text.lower()
    if declared == "string":
        return text
    if declared in (None, "boolean") and lowered in _TRUE | _FALSE:
        return lowered in _TRUE
    if declared in (None, "integer", "number") and _INTEGER.match(text):
        return int(text)
    if declared in (None, "number") and _DECIMAL.match(text):
        return float(text)
    if declared is None:
        return text
    raise ValueError(f"{text!r} is not {'an' if declared[0] in 'aeiou' else 'a'} {declared}")


def parse_row(line: int, columns: list[Column], cells: list[str]) -> ContactRow | RowError:
    if len(cells) != len(columns):
        return RowError(line, f"{len(cells)} cells for {len(columns)} columns")
    row = ContactRow(line, "")
    for column, cell in zip(columns, cells, strict=True):
        text = unneutralised(cell.strip())
        if column.kind == "ignored" or (text == "" and column.name != "email"):
            continue
        try:
            if column.name == "email":
                row.email = normalize(text) if text else ""
            elif column.name == "subscribed":
                row.fields["subscribed"] = typed(text, "boolean")
            elif column.kind == "field":
                if len(text) > MAX_NAME_LENGTH:
                    raise ValueError(f"longer than {MAX_NAME_LENGTH} characters")
                row.fields[column.name] = text
            else:
                row.attributes[column.name] = typed(text, column.type)
        except ValueError as error:
            return RowError(line, f"{column.name}: {error}", email=text if column.name == "email" else None)
    if not row.email:
        return RowError(line, "email: missing")
    return row


def read_rows(lines: Iterable[str]) -> tuple[list[Column], Iterator[ContactRow | RowError]]:
    """The header's columns and, lazily, each data row (skipping blank lines) parsed with
    the line number it starts on. `lines` is text with the BOM already removed
    (open with encoding="utf-8-sig")."""
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        raise HeaderError("the file is empty") from None
    except csv.Error as error:
        raise HeaderError(f"header: {error}") from None
    columns = read_header(header)

    def rows() -> Iterator[ContactRow | RowError]:
        start = reader.line_num + 1
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                yield RowError(start, f"unreadable CSV: {error}")
                start = reader.line_num + 1
                continue
            if cells and any(c.strip() for c in cells):
                yield parse_row(start, columns, cells)
            start = reader.line_num + 1
    return columns, rows()


def export_header(attribute_names: Iterable[str]) -> list[str]:
    return [*EXPORT_FIELDS, *sorted(attribute_names)]


def export_row(contact: dict, attribute_names: list[str]) -> list[str]:
    """One contact as export cells (booleans as true/false, empty for unset), each one
    `neutralised`."""
    def cell(value) -> str:
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return neutralised(str(value))
    attributes = contact.get("attributes") or {}
    return [cell(contact.get("_id")), cell(contact.get("email")), cell(contact.get("first_name")),
            cell(contact.get("last_name")), cell(bool(contact.get("subscribed"))), cell(bool(contact.get("bounced"))),
            cell(contact.get("created_at"))] + [cell(attributes.get(name)) for name in attribute_names]
