"""Segments over real HTTP. Every operator runs against one seeded audience, and the
expected contacts are computed here in plain Python over the seed data, independently of
the rule compiler, then compared with GET /segments/:id/contacts and the estimate."""

import datetime as dt
import uuid

import pytest

from mongo import contacts as contact_store
from tests.support.api import assert_error
from tests.support.audience import make_contact, make_list, make_tag

SEED = [
    # email, first, last, attributes, subscribed, bounced, tags, lists
    ("Ann@Example.org", "Ann", "Smith", {"plan": "pro", "age": 30, "score": 1.5, "vip": True, "city": "Oslo"},
     True, False, ["t1"], ["l1"]),
    ("bob@example.org", "Bob", "Annan", {"plan": "free", "age": 25, "score": 2.0, "vip": False},
     False, False, ["t1", "t2"], ["l1", "l2"]),
    ("carol@sample.net", "Carol", None, {"plan": "enterprise", "age": 40, "city": "Bergen"},
     True, True, [], ["l2"]),
    ("dave@example.org", None, "Dunn", {"age": 35, "vip": True}, True, False, ["t2"], []),
    ("erin@other.io", "Erin", "Smithers", {}, True, False, [], []),
    ("frank.pro@example.org", "Frank", "O'Neil", {"plan": "Professional", "score": 0.5},
     False, True, ["t1"], ["l1"]),
]


async def set_created_at(db, contact_id, created_at):
    await db.contacts.update_one({"_id": contact_id}, {"$set": {"created_at": created_at}})


@pytest.fixture(scope="module")
def seeded(service):
    tenant = service.tenant()
    tags = {name: make_tag(tenant, name)["id"] for name in ("t1", "t2")}
    lists = {name: make_list(tenant, name)["id"] for name in ("l1", "l2")}
    people = []
    for email, first, last, attributes, subscribed, bounced, tag_names, list_names in SEED:
        contact = make_contact(tenant, email, first_name=first, last_name=last, attributes=attributes,
                               subscribed=subscribed)
        for name in tag_names:
            tenant.post(f"/tags/{tags[name]}/contacts", json={"contact_ids": [contact["id"]]})
        for name in list_names:
            tenant.post(f"/lists/{lists[name]}/members", json={"contact_ids": [contact["id"]]})
        if bounced:
            service.store.run(contact_store.mark_bounced, tenant.workspace_id, email)
        # creation times a month apart: the embedded store's find compares timestamp-like
        # strings at one-second precision (its count does not), see docs/audience.md
        created_at = f"2024-{len(people) + 1:02d}-15T12:00:00.000000Z"
        service.store.run(set_created_at, contact["id"], created_at)
        people.append({**contact, "bounced": bounced, "tags": [tags[n] for n in tag_names],
                       "lists": [lists[n] for n in list_names], "created_at": created_at})
    # a contact of another workspace that matches nearly everything must never appear
    make_contact(service.tenant(), "ann@example.org", first_name="Ann", attributes=SEED[0][3])
    return {"tenant": tenant, "tags": tags, "lists": lists, "people": people}


# -- the expected semantics, written out plainly ---------------------------------------

def field_value(person, field):
    if field in ("email", "first_name", "last_name", "subscribed", "bounced", "created_at", "tags", "lists"):
        value = person[field]
        return value.lower() if field == "email" else value
    name = field.removeprefix("attributes.")
    return person["attributes"].get(name, MISSING)


MISSING = object()


def as_time(text):
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def expected_match(person, rule):
    field, op, value = rule["field"], rule["operator"], rule.get("value")
    actual = field_value(person, field)
    if field == "created_at":
        actual, value = as_time(actual), as_time(value)
    if field == "email":
        if isinstance(value, list):
            value = [v.lower() for v in value]
        elif isinstance(value, str):
            value = value.lower()
    if field in ("tags", "lists"):
        return {"equals": lambda: value in actual, "contains": lambda: value in actual,
                "not_equals": lambda: value not in actual, "not_contains": lambda: value not in actual,
                "in": lambda: any(v in actual for v in value), "exists": lambda: bool(actual),
                "not_exists": lambda: not actual}[op]()
    present = actual is not MISSING and actual is not None and actual != ""
    text = actual if isinstance(actual, str) else None
    if op == "exists":
        return present if field in ("email", "first_name", "last_name") else actual is not MISSING
    if op == "not_exists":
        return not expected_match(person, {**rule, "operator": "exists"})
    if op == "equals":
        return present and actual == value and type(actual) is type(value)
    if op == "not_equals":
        return not expected_match(person, {**rule, "operator": "equals"})
    if op == "contains":
        return text is not None and value.lower() in text.lower()
    if op == "not_contains":
        return not expected_match(person, {**rule, "operator": "contains"})
    if op == "starts_with":
        return text is not None and text.lower().startswith(value.lower())
    if op == "in":
        return present and actual in value
    if not present or isinstance(actual, bool) or type(actual) is not type(value) and not (
            isinstance(actual, (int, float)) and isinstance(value, (int, float))):
        return False
    return {"gt": actual > value, "gte": actual >= value, "lt": actual < value, "lte": actual <= value}[op]


def expected_ids(seeded, conditions):
    match = all if conditions.get("match", "all") == "all" else any
    return {p["id"] for p in seeded["people"] if match(expected_match(p, r) for r in conditions["rules"])}


def resolve(seeded, rule):
    """Rules in the table name tags and lists by seed name; swap in their ids."""
    table = seeded["tags"] if rule["field"] == "tags" else seeded["lists"] if rule["field"] == "lists" else None
    value = rule.get("value")
    if table is not None and value is not None:
        value = [table[v] for v in value] if isinstance(value, list) else table[value]
        return {**rule, "value": value}
    if rule["field"] == "created_at" and isinstance(value, int):  # the n-th contact's creation time
        return {**rule, "value": seeded["people"][value]["created_at"]}
    return rule


def rule(field, operator, value=None):
    out = {"field": field, "operator": operator}
    if value is not None:
        out["value"] = value
    return out


CASES = [
    rule("email", "equals", "ANN@example.org"), rule("email", "not_equals", "ann@example.org"),
    rule("email", "contains", "EXAMPLE"), rule("email", "not_contains", "example.org"),
    rule("email", "starts_with", "B"), rule("email", "in", ["Bob@example.org", "erin@other.io", "x@y.z"]),
    rule("email", "gt", "c"), rule("email", "lte", "carol@sample.net"), rule("email", "exists"),
    rule("first_name", "equals", "Ann"), rule("first_name", "not_equals", "Ann"),
    rule("first_name", "contains", "AN"), rule("first_name", "not_contains", "an"),
    rule("first_name", "starts_with", "c"), rule("first_name", "exists"), rule("first_name", "not_exists"),
    rule("first_name", "in", ["Ann", "Bob"]), rule("first_name", "gte", "Bob"), rule("first_name", "lt", "Carol"),
    rule("last_name", "contains", "smith"), rule("last_name", "starts_with", "o'"), rule("last_name", "not_exists"),
    rule("subscribed", "equals", False), rule("subscribed", "not_equals", False),
    rule("bounced", "equals", True), rule("bounced", "not_equals", True),
    rule("created_at", "gt", 2), rule("created_at", "gte", 2), rule("created_at", "lt", 3),
    rule("created_at", "lte", 3), rule("created_at", "equals", 4), rule("created_at", "not_equals", 4),
    rule("created_at", "gte", "2024-03-01"), rule("created_at", "lt", "2024-03-15T14:00:00+02:00"),
    rule("attributes.plan", "equals", "pro"), rule("plan", "not_equals", "pro"), rule("plan", "contains", "PRO"),
    rule("plan", "not_contains", "pro"), rule("plan", "starts_with", "ent"), rule("plan", "in", ["pro", "free"]),
    rule("plan", "exists"), rule("plan", "not_exists"), rule("plan", "gt", "free"),
    rule("age", "gt", 30), rule("age", "gte", 30), rule("age", "lt", 30), rule("age", "lte", 30),
    rule("attributes.age", "equals", 30), rule("age", "not_equals", 30), rule("age", "in", [25, 40, 99]),
    rule("age", "exists"), rule("age", "not_exists"),
    rule("score", "gt", 1.5), rule("score", "lte", 1.5),
    rule("vip", "equals", True), rule("vip", "not_equals", True), rule("city", "starts_with", "os"),
    rule("tags", "equals", "t1"), rule("tags", "not_equals", "t1"), rule("tags", "contains", "t2"),
    rule("tags", "not_contains", "t2"), rule("tags", "in", ["t1", "t2"]), rule("tags", "exists"),
    rule("tags", "not_exists"),
    rule("lists", "equals", "l1"), rule("lists", "not_equals", "l1"), rule("lists", "in", ["l2"]),
    rule("lists", "exists"), rule("lists", "not_exists"),
]


def check_segment(seeded, conditions):
    tenant = seeded["tenant"]
    response = tenant.post("/segments", json={"name": "case", "conditions": conditions})
    assert response.status_code == 201, response.text
    segment_id = response.json()["data"]["id"]
    listed = tenant.get(f"/segments/{segment_id}/contacts", params={"limit": 1000}).json()
    estimate = tenant.post(f"/segments/{segment_id}/estimate").json()["data"]
    tenant.delete(f"/segments/{segment_id}")
    wanted = expected_ids(seeded, conditions)
    assert {c["id"] for c in listed["data"]} == wanted
    assert listed["pagination"]["total"] == len(wanted) == estimate["count"]
    return wanted


@pytest.mark.parametrize("case", CASES, ids=lambda r: f"{r['field']}-{r['operator']}")
def test_every_operator_matches_the_independently_computed_audience(seeded, case):
    check_segment(seeded, {"match": "all", "rules": [resolve(seeded, case)]})


def test_the_seed_makes_the_operator_cases_meaningful(seeded):
    """Guard against a seed where most cases trivially match nobody or everybody."""
    sizes = [len(expected_ids(seeded, {"rules": [resolve(seeded, c)]})) for c in CASES]
    assert sum(1 for s in sizes if 0 < s < len(SEED)) >= len(CASES) - 3


def test_match_all_needs_every_rule_and_match_any_one_of_them(seeded):
    rules = [rule("vip", "equals", True), resolve(seeded, rule("tags", "equals", "t2"))]
    both = check_segment(seeded, {"match": "all", "rules": rules})
    either = check_segment(seeded, {"match": "any", "rules": rules})
    assert len(both) == 1 and len(either) == 3


def test_segment_contacts_page_and_keep_their_total(seeded):
    tenant = seeded["tenant"]
    segment = tenant.post("/segments", json={"name": "All example.org", "conditions": {
        "match": "all", "rules": [rule("email", "contains", "example.org")]}}).json()["data"]
    first = tenant.get(f"/segments/{segment['id']}/contacts", params={"limit": 2}).json()
    rest = tenant.get(f"/segments/{segment['id']}/contacts", params={"limit": 2, "offset": 2}).json()
    assert first["pagination"] == {"total": 4, "limit": 2, "offset": 0, "has_more": True}
    assert rest["pagination"]["has_more"] is False
    assert len({c["id"] for c in first["data"] + rest["data"]}) == 4


def test_create_get_patch_list_and_delete_a_segment(tenant):
    conditions = {"match": "all", "rules": [{"field": "plan", "operator": "equals", "value": "pro"}]}
    created = tenant.post("/segments", json={"name": "Pro", "description": "paying", "conditions": conditions})
    assert created.status_code == 201, created.text
    segment = created.json()["data"]
    assert segment["conditions"] == conditions and segment["description"] == "paying"
    assert tenant.get(f"/segments/{segment['id']}").json()["data"] == segment

    make_contact(tenant, "free@example.org", attributes={"plan": "free"})
    changed = {"match": "any", "rules": [{"field": "plan", "operator": "in", "value": ["free"]}]}
    updated = tenant.patch(f"/segments/{segment['id']}",
                           json={"conditions": changed, "description": None}).json()["data"]
    assert updated["conditions"] == changed and updated["description"] is None and updated["name"] == "Pro"
    assert tenant.post(f"/segments/{segment['id']}/estimate").json()["data"]["count"] == 1

    tenant.post("/segments", json={"name": "Other", "conditions": conditions})
    found = tenant.get("/segments", params={"search": "pr"}).json()
    assert [s["name"] for s in found["data"]] == ["Pro"] and found["pagination"]["total"] == 1
    assert tenant.get("/segments").json()["pagination"]["total"] == 2

    response = tenant.delete(f"/segments/{segment['id']}")
    assert response.status_code == 200 and response.json()["data"] == {"id": segment["id"], "deleted": True}
    assert_error(tenant.get(f"/segments/{segment['id']}"), 404, "not_found")


@pytest.mark.parametrize("payload, path", [
    ({"conditions": {"match": "all", "rules": [rule("email", "exists")]}}, "name"),
    ({"name": "S"}, "conditions"),
    ({"name": "x" * 201, "conditions": {"rules": [rule("email", "exists")]}}, "name"),
    ({"name": "S", "conditions": {"match": "most", "rules": [rule("email", "exists")]}}, "conditions.match"),
    ({"name": "S", "conditions": {"match": "all", "rules": []}}, "conditions.rules"),
    ({"name": "S", "conditions": {"match": "all", "rules": [rule("email", "exists"), rule("age", "between", 1)]}},
     "conditions.rules[1].operator"),
    ({"name": "S", "conditions": {"match": "all", "rules": [rule("subscribed", "starts_with", "t")]}},
     "conditions.rules[0].operator"),
    ({"name": "S", "conditions": {"match": "all", "rules": [rule("subscribed", "equals", "yes")]}},
     "conditions.rules[0].value"),
    ({"name": "S", "conditions": {"match": "all", "rules": [rule("age", "gt", {"n": 1})]}},
     "conditions.rules[0].value"),
    ({"name": "S", "conditions": {"match": "all", "rules": [rule("a.b", "equals", 1)]}},
     "conditions.rules[0].field"),
    ({"name": "S", "conditions": {"match": "all", "rules": [{"field": "age", "operator": "gt", "value": 1, "x": 1}]}},
     "conditions.rules[0].x"),
    ({"name": "S", "conditions": {"match": "all", "rules": [rule("age", "gt", 1)] * 101}}, "conditions.rules"),
])
def test_invalid_segments_are_refused_with_the_rule_path(tenant, payload, path):
    assert_error(tenant.post("/segments", json=payload), 400, "validation_error", path)


def test_patch_with_invalid_conditions_changes_nothing(tenant):
    conditions = {"match": "all", "rules": [rule("age", "gt", 1)]}
    segment = tenant.post("/segments", json={"name": "S", "conditions": conditions}).json()["data"]
    bad = {"match": "all", "rules": [rule("age", "gt", 1), rule("created_at", "lt", "not a date")]}
    assert_error(tenant.patch(f"/segments/{segment['id']}", json={"conditions": bad}), 400, "validation_error",
          "conditions.rules[1].value")
    assert_error(tenant.patch(f"/segments/{segment['id']}", json={"name": None}), 400, "validation_error", "name")
    assert tenant.get(f"/segments/{segment['id']}").json()["data"]["conditions"] == conditions


@pytest.mark.parametrize("rules, path", [
    ([rule("tags", "equals", "missing-tag")], "conditions.rules[0].value"),
    ([rule("age", "gt", 1), rule("lists", "in", ["missing-list"])], "conditions.rules[1].value[0]"),
])
def test_rules_naming_an_unknown_tag_or_list_answer_404_with_its_path(tenant, rules, path):
    # as every other cross-reference (a campaign's list, an automation step's tag) answers
    assert_error(tenant.post("/segments", json={"name": "S", "conditions": {"match": "all", "rules": rules}}),
                 404, "not_found", path)


def test_another_workspaces_tag_is_not_a_valid_rule_value(service, tenant):
    theirs = make_tag(service.tenant(), "theirs")
    assert_error(tenant.post("/segments", json={"name": "S", "conditions": {
        "rules": [rule("tags", "equals", theirs["id"])]}}), 404, "not_found", "conditions.rules[0].value")


def test_unknown_or_foreign_segments_answer_404_everywhere(service, tenant):
    other = service.tenant()
    foreign = other.post("/segments", json={"name": "Theirs", "conditions": {
        "rules": [rule("email", "exists")]}}).json()["data"]
    for segment_id in (foreign["id"], str(uuid.uuid4())):
        assert_error(tenant.get(f"/segments/{segment_id}"), 404, "not_found")
        assert_error(tenant.patch(f"/segments/{segment_id}", json={"name": "x"}), 404, "not_found")
        assert_error(tenant.post(f"/segments/{segment_id}/estimate"), 404, "not_found")
        assert_error(tenant.get(f"/segments/{segment_id}/contacts"), 404, "not_found")
        assert_error(tenant.delete(f"/segments/{segment_id}"), 404, "not_found")
    assert other.get(f"/segments/{foreign['id']}").status_code == 200
