"""The audience rule language shared by segments and dynamic lists, compiled to a MongoDB
filter (a plain dict) so matching always runs in the store, never in Python.

    conditions = {"match": "all" | "any",
                  "rules": [{"field": ..., "operator": ..., "value": ...}, ...]}

Fields and the operators each accepts:

| field | kind | operators |
|---|---|---|
| email, first_name, last_name | text | equals, not_equals, contains, not_contains, starts_with, in, gt, gte, lt, lte, exists, not_exists |
| subscribed, bounced | boolean | equals, not_equals |
| created_at | timestamp (ISO 8601) | equals, not_equals, gt, gte, lt, lte |
| tags (tag id), lists (static list id) | membership | equals/contains (has it), not_equals/not_contains (has not), in (has any of), exists (has any), not_exists (has none) |
| attributes.<name>, or a bare <name> | custom attribute | every operator |

`contains`, `not_contains` and `starts_with` are case-insensitive; `email` compares
case-insensitively throughout (it is matched on the lower-cased address); other
`equals` compare exactly. `not_equals` / `not_contains` also match contacts that lack the
field. `exists` on a text field means "has a non-empty value".

The compiled filters stay inside the subset the embedded store gets right
(docs/store-notes.md): negation is `$nor` (never `$not`, never `$ne` on arrays), no `null`
is put in a filter, and user text reaches `$regex` only through `re.escape`.
"""  # noqa: E501 (a table, a row a line)

from __future__ import annotations

import re
from typing import Any, NoReturn

from pipelines.core.clock import iso, parse_iso
from pipelines.core.errors import ValidationFailed

MATCH_VALUES = ("all", "any")
OPERATORS = ("equals", "not_equals", "contains", "not_contains", "starts_with",
             "gt", "gte", "lt", "lte", "exists", "not_exists", "in")
MAX_RULES = 100
MAX_IN_VALUES = 500
MAX_TEXT_VALUE_CHARS = 500
# Custom attribute names: also what contacts accept as attribute keys.
ATTRIBUTE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]{0,63}$")

_TEXT_FIELDS = {"email": "email_key", "first_name": "first_name", "last_name": "last_name"}
_BOOLEAN_FIELDS = {"subscribed": "subscribed", "bounced": "bounced"}
_TIME_FIELDS = {"created_at": "created_at"}
_MEMBERSHIP_FIELDS = {"tags": "tags", "lists": "lists"}
_COMPARISONS = {"gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte"}

_ALLOWED = {
    "text": set(OPERATORS),
    "attribute": set(OPERATORS),
    "boolean": {"equals", "not_equals"},
    "time": {"equals", "not_equals", "gt", "gte", "lt", "lte"},
    "membership": {"equals", "not_equals", "contains", "not_contains", "in", "exists", "not_exists"},
}


def field_kind(field: str) -> tuple[str, str] | None:
    """(kind, stored field path) for a rule's field name, or None if it names nothing."""
    for kind, table in (("text", _TEXT_FIELDS), ("boolean", _BOOLEAN_FIELDS),
                        ("time", _TIME_FIELDS), ("membership", _MEMBERSHIP_FIELDS)):
        if field in table:
            return kind, table[field]
    name = field[len("attributes."):] if field.startswith("attributes.") else field
    if ATTRIBUTE_NAME.match(name):
        return "attribute", f"attributes.{name}"
    return None


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) and value is not None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _regex(text: str, anchored: bool) -> dict:
    return {"$regex": ("^" if anchored else "") + re.escape(text), "$options": "i"}


class _Rule:
    """One rule being checked and compiled; `fail` names the offending part precisely."""

    def __init__(self, rule: Any, path: str):
        self.path = path
        if not isinstance(rule, dict):
            self.fail("", "Each rule must be an object with field, operator and value.")
        unknown = set(rule) - {"field", "operator", "value"}
        if unknown:
            self.fail(sorted(unknown)[0], "Unknown field.")
        self.field = rule.get("field")
        self.operator = rule.get("operator")
        self.value = rule.get("value")
        if not isinstance(self.field, str) or not self.field:
            self.fail("field", "field is required and must be a string.")
        if not isinstance(self.operator, str) or not self.operator:
            self.fail("operator", "operator is required and must be a string.")
        resolved = field_kind(self.field)
        if resolved is None:
            self.fail("field", f"Unknown field {self.field!r}; use a contact field, tags, lists, "
                               "or a custom attribute name (letters, digits, _ and -).")
        self.kind, self.stored = resolved
        if self.operator not in OPERATORS:
            self.fail("operator", f"Unknown operator {self.operator!r}; one of {', '.join(OPERATORS)}.")
        if self.operator not in _ALLOWED[self.kind]:
            allowed = ", ".join(o for o in OPERATORS if o in _ALLOWED[self.kind])
            self.fail("operator", f"{self.operator} does not apply to {self.field}; use one of {allowed}.")

    def fail(self, part: str, message: str) -> NoReturn:
        where = f"{self.path}.{part}" if part else self.path
        raise ValidationFailed(f"{where}: {message}", path=where)

    # -- values -------------------------------------------------------------------------

    def _scalar(self, value: Any) -> Any:
        """Check and normalise one comparison value for this rule's field kind."""
        if self.kind == "boolean":
            if not isinstance(value, bool):
                self.fail("value", f"{self.field} compares with true or false.")
            return value
        if self.kind == "time":
            if not isinstance(value, str):
                self.fail("value", f"{self.field} compares with an ISO 8601 timestamp string.")
            try:
                return iso(parse_iso(value))
            except ValueError:
                self.fail("value", f"{value!r} is not an ISO 8601 timestamp.")
        if self.kind in ("text", "membership"):
            if not isinstance(value, str) or not value:
                self.fail("value", f"{self.field} compares with a non-empty string.")
            if len(value) > MAX_TEXT_VALUE_CHARS:
                self.fail("value", f"value is longer than {MAX_TEXT_VALUE_CHARS} characters.")
            return value.lower() if self.field == "email" else value
        if not _is_scalar(value):
            self.fail("value", "value must be a string, a number or a boolean.")
        if isinstance(value, str) and len(value) > MAX_TEXT_VALUE_CHARS:
            self.fail("value", f"value is longer than {MAX_TEXT_VALUE_CHARS} characters.")
        return value

    def _text(self) -> str:
        if not isinstance(self.value, str) or not self.value:
            self.fail("value", f"{self.operator} needs a non-empty string value.")
        if len(self.value) > MAX_TEXT_VALUE_CHARS:
            self.fail("value", f"value is longer than {MAX_TEXT_VALUE_CHARS} characters.")
        return self.value

    def _ordered(self) -> Any:
        value = self._scalar(self.value)
        if self.kind == "attribute" and not (_is_number(value) or isinstance(value, str)):
            self.fail("value", f"{self.operator} compares with a number or a string.")
        return value

    def _many(self) -> list:
        if not isinstance(self.value, list) or not self.value:
            self.fail("value", "in needs a non-empty array of values.")
        if len(self.value) > MAX_IN_VALUES:
            self.fail("value", f"in accepts at most {MAX_IN_VALUES} values.")
        out = []
        for index, item in enumerate(self.value):
            try:
                out.append(self._scalar(item))
            except ValidationFailed as error:
                where = f"{self.path}.value[{index}]"
                raise ValidationFailed(f"{where}: {error.message.split(': ', 1)[-1]}", path=where) from None
        return list(dict.fromkeys(out))

    # -- compile --------------------------------------------------------------------------

    def compile(self) -> dict:
        f, op = self.stored, self.operator
        if op == "not_exists" and self.kind == "membership":
            return {f: {"$size": 0}}
        if op in ("exists", "not_exists"):
            present = self._present()
            return present if op == "exists" else {"$nor": [present]}
        if op == "in":
            return {f: {"$in": self._many()}}
        if op in _COMPARISONS:
            return {f: {_COMPARISONS[op]: self._ordered()}}
        if self.kind == "membership":
            has = {f: self._scalar(self.value)}
            return has if op in ("equals", "contains") else {f: {"$nin": [has[f]]}}
        if op == "equals":
            return {f: self._scalar(self.value)}
        if op == "not_equals":
            return {"$nor": [{f: self._scalar(self.value)}]}
        text = self._text()
        if op == "contains":
            return {f: _regex(text, anchored=False)}
        if op == "not_contains":
            return {"$nor": [{f: _regex(text, anchored=False)}]}
        return {f: _regex(text, anchored=True)}  # starts_with

    def _present(self) -> dict:
        if self.kind == "membership":
            return {"$nor": [{self.stored: {"$size": 0}}]}
        if self.kind == "text":
            return {self.stored: {"$gt": ""}}
        return {self.stored: {"$exists": True}}


def _rules(conditions: Any, path: str) -> tuple[str, list]:
    if not isinstance(conditions, dict):
        raise ValidationFailed(f"{path}: conditions must be an object with match and rules.", path=path)
    unknown = set(conditions) - {"match", "rules"}
    if unknown:
        where = f"{path}.{sorted(unknown)[0]}"
        raise ValidationFailed(f"{where}: Unknown field.", path=where)
    match = conditions.get("match", "all")
    if match not in MATCH_VALUES:
        raise ValidationFailed(f"{path}.match: match is all or any.", path=f"{path}.match")
    rules = conditions.get("rules")
    if not isinstance(rules, list) or not rules:
        raise ValidationFailed(f"{path}.rules: at least one rule is required.", path=f"{path}.rules")
    if len(rules) > MAX_RULES:
        raise ValidationFailed(f"{path}.rules: at most {MAX_RULES} rules.", path=f"{path}.rules")
    return match, rules


def compile_conditions(conditions: Any, path: str = "conditions") -> dict:
    """A MongoDB filter selecting the contacts the conditions describe (workspace and
    soft-delete scoping are added by the store layer)."""
    match, rules = _rules(conditions, path)
    compiled = [_Rule(rule, f"{path}.rules[{i}]").compile() for i, rule in enumerate(rules)]
    return {"$and" if match == "all" else "$or": compiled}


def compile_rule(rule: Any, path: str) -> dict:
    """One rule checked and compiled; errors name `path.field`, `path.operator`, `path.value`
    (automation condition steps check their rule with it)."""
    return _Rule(rule, path).compile()


def references(conditions: dict, path: str = "conditions") -> dict[str, dict[str, str]]:
    """Tag and list ids the (already compiled, so valid) conditions refer to, each with
    the path of the value naming it: {"tags": {id: path}, "lists": {id: path}}."""
    found: dict[str, dict[str, str]] = {"tags": {}, "lists": {}}
    for i, rule in enumerate(conditions["rules"]):
        if rule["field"] not in found or rule["operator"] in ("exists", "not_exists"):
            continue
        values = rule["value"] if isinstance(rule["value"], list) else [rule["value"]]
        for j, value in enumerate(values):
            suffix = f"[{j}]" if isinstance(rule["value"], list) else ""
            found[rule["field"]].setdefault(value, f"{path}.rules[{i}].value{suffix}")
    return found
