"""The rule compiler on its own: every operator's filter, and the precise paths of errors."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.audience.segment_rules import compile_conditions, references
from pipelines.core.errors import ValidationFailed


def one(field, operator, value=None, match="all"):
    rule = {"field": field, "operator": operator}
    if value is not None:
        rule["value"] = value
    compiled = compile_conditions({"match": match, "rules": [rule]})
    return compiled["$and" if match == "all" else "$or"][0]


def error_of(conditions):
    with pytest.raises(ValidationFailed) as caught:
        compile_conditions(conditions)
    return caught.value


def test_match_all_joins_rules_with_and_and_any_with_or():
    rules = [{"field": "subscribed", "operator": "equals", "value": True},
             {"field": "plan", "operator": "equals", "value": "pro"}]
    assert compile_conditions({"match": "all", "rules": rules}) == {
        "$and": [{"subscribed": True}, {"attributes.plan": "pro"}]}
    assert compile_conditions({"match": "any", "rules": rules}) == {
        "$or": [{"subscribed": True}, {"attributes.plan": "pro"}]}


def test_match_defaults_to_all():
    assert "$and" in compile_conditions({"rules": [{"field": "bounced", "operator": "equals", "value": False}]})


def test_email_is_compared_on_the_lower_cased_key():
    assert one("email", "equals", "Ann@Example.COM") == {"email_key": "ann@example.com"}
    assert one("email", "in", ["A@x.io", "a@x.io"]) == {"email_key": {"$in": ["a@x.io"]}}


def test_equals_and_not_equals_on_attributes_use_plain_match_and_nor():
    assert one("attributes.age", "equals", 30) == {"attributes.age": 30}
    assert one("age", "not_equals", 30) == {"$nor": [{"attributes.age": 30}]}
    assert one("vip", "equals", True) == {"attributes.vip": True}


def test_contains_and_starts_with_are_escaped_case_insensitive_regexes():
    assert one("first_name", "contains", "a.b*") == {"first_name": {"$regex": r"a\.b\*", "$options": "i"}}
    assert one("last_name", "starts_with", "Mc") == {"last_name": {"$regex": "^Mc", "$options": "i"}}
    assert one("city", "not_contains", "(x)") == {
        "$nor": [{"attributes.city": {"$regex": r"\(x\)", "$options": "i"}}]}


@pytest.mark.parametrize("operator, mongo", [("gt", "$gt"), ("gte", "$gte"), ("lt", "$lt"), ("lte", "$lte")])
def test_comparisons_map_to_mongo_operators(operator, mongo):
    assert one("score", operator, 7.5) == {"attributes.score": {mongo: 7.5}}


def test_created_at_values_are_normalised_to_the_stored_timestamp_form():
    assert one("created_at", "gte", "2024-05-01") == {"created_at": {"$gte": "2024-05-01T00:00:00.000000Z"}}
    assert one("created_at", "lt", "2024-05-01T12:00:00+02:00") == {
        "created_at": {"$lt": "2024-05-01T10:00:00.000000Z"}}


def test_exists_on_text_fields_means_a_non_empty_value():
    assert one("first_name", "exists") == {"first_name": {"$gt": ""}}
    assert one("first_name", "not_exists") == {"$nor": [{"first_name": {"$gt": ""}}]}


def test_exists_on_attributes_checks_presence_and_ignores_value():
    assert one("attributes.plan", "exists", True) == {"attributes.plan": {"$exists": True}}
    assert one("plan", "not_exists") == {"$nor": [{"attributes.plan": {"$exists": True}}]}


def test_membership_rules_test_the_id_arrays_without_ne():
    assert one("tags", "equals", "t1") == {"tags": "t1"}
    assert one("tags", "contains", "t1") == {"tags": "t1"}
    assert one("lists", "not_equals", "l1") == {"lists": {"$nin": ["l1"]}}
    assert one("lists", "not_contains", "l1") == {"lists": {"$nin": ["l1"]}}
    assert one("tags", "in", ["t1", "t2"]) == {"tags": {"$in": ["t1", "t2"]}}
    assert one("tags", "exists") == {"$nor": [{"tags": {"$size": 0}}]}
    assert one("tags", "not_exists") == {"tags": {"$size": 0}}


def test_no_compiled_filter_contains_not_or_ne_or_null():
    rules = [{"field": f, "operator": o, "value": v} for f, o, v in [
        ("email", "not_equals", "a@b.c"), ("first_name", "not_contains", "x"),
        ("tags", "not_equals", "t"), ("plan", "not_exists", None), ("lists", "not_exists", None)]]
    text = repr(compile_conditions({"match": "any", "rules": rules}))
    assert "$not'" not in text and "$ne'" not in text and "None" not in text


def test_unknown_operator_names_the_rule_operator_path():
    rules = [{"field": "email", "operator": "equals", "value": "a@b.c"}] * 2 + [
        {"field": "email", "operator": "matches", "value": "x"}]
    error = error_of({"match": "all", "rules": rules})
    assert error.path == "conditions.rules[2].operator"
    assert error.code == "validation_error"


def test_operator_that_does_not_apply_to_the_field_is_refused():
    assert error_of({"rules": [{"field": "subscribed", "operator": "contains", "value": "x"}]}).path == \
        "conditions.rules[0].operator"
    assert error_of({"rules": [{"field": "tags", "operator": "gt", "value": "x"}]}).path == \
        "conditions.rules[0].operator"


@pytest.mark.parametrize("rule, path", [
    ({"field": "subscribed", "operator": "equals", "value": "true"}, "conditions.rules[0].value"),
    ({"field": "created_at", "operator": "gt", "value": "yesterday"}, "conditions.rules[0].value"),
    ({"field": "first_name", "operator": "contains", "value": ""}, "conditions.rules[0].value"),
    ({"field": "age", "operator": "gt", "value": True}, "conditions.rules[0].value"),
    ({"field": "age", "operator": "equals"}, "conditions.rules[0].value"),
    ({"field": "age", "operator": "in", "value": "x"}, "conditions.rules[0].value"),
    ({"field": "age", "operator": "in", "value": [1, {"x": 1}]}, "conditions.rules[0].value[1]"),
    ({"field": "email", "operator": "equals", "value": 5}, "conditions.rules[0].value"),
    ({"field": "bad.name", "operator": "equals", "value": 1}, "conditions.rules[0].field"),
    ({"field": "$where", "operator": "equals", "value": 1}, "conditions.rules[0].field"),
    ({"operator": "equals", "value": 1}, "conditions.rules[0].field"),
    ({"field": "age", "operator": "equals", "value": 1, "extra": 1}, "conditions.rules[0].extra"),
])
def test_invalid_values_and_fields_name_their_path(rule, path):
    assert error_of({"match": "all", "rules": [rule]}).path == path


def test_match_and_rules_shape_errors_name_their_path():
    assert error_of({"match": "some", "rules": [{"field": "a", "operator": "exists"}]}).path == "conditions.match"
    assert error_of({"match": "all", "rules": []}).path == "conditions.rules"
    assert error_of({"match": "all"}).path == "conditions.rules"
    assert error_of([]).path == "conditions"


def test_references_lists_tag_and_list_ids_with_their_paths():
    conditions = {"match": "any", "rules": [
        {"field": "tags", "operator": "equals", "value": "t1"},
        {"field": "lists", "operator": "in", "value": ["l1", "l2"]},
        {"field": "tags", "operator": "exists"}]}
    compile_conditions(conditions)
    assert references(conditions) == {
        "tags": {"t1": "conditions.rules[0].value"},
        "lists": {"l1": "conditions.rules[1].value[0]", "l2": "conditions.rules[1].value[1]"}}


@given(st.text(min_size=1, max_size=40))
def test_contains_matches_any_text_literally(text):
    pattern = one("first_name", "contains", text)["first_name"]["$regex"]
    assert re.search(pattern, "--" + text + "--", re.IGNORECASE)
