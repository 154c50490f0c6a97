"""Input a probe sent to find holes, refused at the API with 400 `validation_error` and the
offending `path` (never accepted to fail later, never a 500), and the contract drift it
found: parameters given twice, numbers in other forms than plain ASCII digits, values too
large for the store, encoded words where a value reaches a header, ids of the wrong
shape, and OPTIONS on a path beside an id route."""

import uuid

import pytest

from tests.support.api import assert_error
from tests.support.audience import make_contact, make_list, make_tag

MB = 1024 * 1024


# -- sizes: never DocumentTooLarge ---------------------------------------------------------------
def test_a_10_mb_attribute_is_refused_with_its_path_on_create_and_on_patch(tenant):
    huge = {"big": "x" * (10 * MB)}
    assert_error(tenant.post("/contacts", json={"email": "huge@example.org", "attributes": huge}),
          400, "validation_error", "attributes.big")
    contact = make_contact(tenant, "patched@example.org")
    assert_error(tenant.patch(f"/contacts/{contact['id']}", json={"attributes": huge}), 400, "validation_error",
          "attributes.big")
    assert tenant.get("/contacts").json()["pagination"]["total"] == 1
    assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["attributes"] == {}


def test_an_attribute_value_is_at_most_10_kb_serialised_whatever_its_type(tenant):
    at_limit = "x" * (10 * 1024 - 2)  # plus its two quotes: exactly 10 KB as JSON
    contact = make_contact(tenant, "limit@example.org", attributes={"note": at_limit})
    assert contact["attributes"]["note"] == at_limit
    for value in ("x" * (10 * 1024 - 1), ["y" * 600] * 20, {"deep": "é" * 6000}):
        assert_error(tenant.patch(f"/contacts/{contact['id']}", json={"attributes": {"other": value}}),
              400, "validation_error", "attributes.other")


def test_oversized_free_form_values_of_an_email_are_refused_with_their_path(tenant):
    send = {"to": "bob@example.org", "subject": "Hi"}
    assert_error(tenant.post("/email/send", json={**send, "text": "x" * (2 * MB)}), 400, "validation_error", "text")
    assert_error(tenant.post("/email/send", json={**send, "text": "hi", "template_data": {"blob": "x" * (300 * 1024)}}),
          400, "validation_error", "template_data")
    assert_error(tenant.post("/email/batch", json={"messages": [{**send, "text": "ok"}, {**send, "text": "é" * MB}]}),
          400, "validation_error", "messages[1].text")


def test_an_oversized_template_structure_is_refused_with_its_path(tenant):
    structure = {"blocks": [{"id": "b1", "type": "text", "content": {"text": "x" * (600 * 1024)}}]}
    assert_error(tenant.post("/templates", json={"name": "big", "json_structure": structure}),
          400, "validation_error", "json_structure")


# -- encoded words and line breaks where a value reaches a header ------------------------------
@pytest.mark.parametrize("field, value", [
    ("from_name", "Ann\r\nBcc: x@example.org"), ("reply_to", "=?utf-8?q?x?=@example.org"),
    ("reply_to", "ann@example.org\r\nBcc: x@example.org"), ("to", "=?utf-8?q?bob?=@example.org"),
])
def test_encoded_words_and_line_breaks_in_header_values_are_refused_at_the_api(tenant, field, value):
    body = {"to": "bob@example.org", "subject": "Hi", "text": "hello", field: value}
    assert_error(tenant.post("/email/send", json=body), 400, "validation_error", field)
    batch = {"messages": [{"to": "bob@example.org", "subject": "Hi", "text": "hello", field: value}]}
    assert_error(tenant.post("/email/batch", json=batch), 400, "validation_error", f"messages[0].{field}")


def test_a_recipient_list_names_the_address_carrying_an_encoded_word(tenant):
    body = {"to": ["ok@example.org", "=?utf-8?q?bob?=@example.org"], "subject": "Hi", "text": "hello"}
    assert_error(tenant.post("/email/send", json=body), 400, "validation_error", "to[1]")


@pytest.mark.parametrize("name", ["Zoë Ünal — 山田 =? yes", "=?utf-8?q?Support?=", "Ann =?iso-8859-1?b?w6k=?= Smith"])
@pytest.mark.e2e
def test_a_display_name_in_any_script_is_accepted_and_arrives_as_written(service, tenant, name):
    to = f"name-{uuid.uuid4().hex[:8]}@example.org"
    response = tenant.post("/email/send", json={"to": to, "subject": "Hi", "text": "hello",
                                                "from_name": name, "reply_to": "a=b@example.org"})
    assert response.status_code == 202, response.text
    [received] = service.smtp.wait_for(to)
    assert received.message["From"].addresses[0].display_name == name  # text, never decoded as a word


def test_a_contact_address_carrying_an_encoded_word_is_refused(tenant):
    assert_error(tenant.post("/contacts", json={"email": "=?utf-8?q?ann?=@example.org"}),
                 400, "validation_error", "email")


# -- numbers written as digits only -------------------------------------------------------------
@pytest.mark.parametrize("raw", ["%205", "5%20", "1.0", "1_000", "%D9%A1", "+5", "0x5", "5e0", "%EF%BC%95"])
def test_limit_and_offset_take_plain_ascii_digits_only(tenant, raw):
    for name in ("limit", "offset"):
        assert_error(tenant.get(f"/contacts?{name}={raw}"), 400, "validation_error", name)


@pytest.mark.parametrize("query, path", [("offset=0&offset=5", "offset"), ("limit=5&limit=5", "limit"),
                                         ("limit=5&offset=1&limit=7", "limit"), ("search=a&search=b", "search")])
def test_a_parameter_given_twice_is_refused(tenant, query, path):
    assert_error(tenant.get(f"/contacts?{query}"), 400, "validation_error", path)


def test_an_unknown_parameter_given_twice_is_ignored_like_any_unknown_parameter(tenant):
    assert tenant.get("/contacts?limit=5&offset=0&unknown=1&unknown=2").status_code == 200


def test_an_empty_since_is_refused_as_documented(tenant):
    assert_error(tenant.get("/bounces?since="), 400, "validation_error", "since")
    assert tenant.get("/bounces?since=2026-01-01t00:00:00z").status_code == 200  # RFC 3339 lower case


@pytest.mark.parametrize("value", ["1_000", "١", "１２", " 5", "1e3", "+1", ".5", "5."])
def test_money_strings_are_ascii_digits_with_an_optional_point(tenant, value):
    contact = make_contact(tenant, f"buyer-{uuid.uuid4().hex[:6]}@example.org")
    assert_error(tenant.post("/conversions", json={"contact_id": contact["id"], "value": value}),
          400, "validation_error", "value")
    assert_error(tenant.post("/track/product-view", json={"contact_email": contact["email"], "product_id": "p1",
                                                    "price": value}), 400, "validation_error", "price")
    assert tenant.get("/conversions").json()["pagination"]["total"] == 0


def test_money_as_a_json_number_or_a_plain_decimal_string_is_kept_exactly(tenant):
    contact = make_contact(tenant, "exact@example.org")
    for value, stored in ((49.9, "49.9"), ("1000", "1000"), ("0.0001", "0.0001"), (10, "10")):
        response = tenant.post("/conversions", json={"contact_id": contact["id"], "value": value})
        assert response.status_code == 201, response.text
        assert response.json()["data"]["value"] == stored


# -- ids of the wrong shape (issue 13) --------------------------------------------------------
def test_a_contact_created_into_a_list_id_that_is_not_a_uuid_is_refused_with_its_path(tenant):
    assert_error(tenant.post("/contacts", json={"email": "d@example.org", "list_id": "not-a-uuid"}),
          400, "validation_error", "list_id")
    assert tenant.get("/contacts").json()["pagination"]["total"] == 0
    # an upper-case UUID is the same id
    newsletter = make_list(tenant, "Newsletter")
    contact = make_contact(tenant, "e@example.org", list_id=newsletter["id"].upper())
    assert contact["lists"] == [{"id": newsletter["id"], "name": "Newsletter"}]


def test_tag_assignment_refuses_contact_ids_that_are_not_uuids_and_assigns_nothing(tenant):
    tag = make_tag(tenant, "vip")
    contact = make_contact(tenant, "f@example.org")
    for method in ("post", "delete"):
        response = tenant.client.request(method.upper(), f"/tags/{tag['id']}/contacts",
                                         json={"contact_ids": [contact["id"], "c-1"]})
        assert_error(response, 400, "validation_error", "contact_ids[1]")
    assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["tags"] == []


# -- routes beside an id route ---------------------------------------------------------------
@pytest.mark.parametrize("path, methods", [
    ("/contacts/activity", {"GET", "HEAD", "OPTIONS"}), ("/contacts/duplicates", {"GET", "HEAD", "OPTIONS"}),
    ("/contacts/bulk-delete", {"POST", "OPTIONS"}), ("/templates/render", {"POST", "OPTIONS"}),
    ("/webhooks/triggers", {"GET", "HEAD", "POST", "DELETE", "OPTIONS"}), ("/email/send", {"POST", "OPTIONS"}),
])
def test_options_beside_an_id_route_advertises_only_that_paths_methods(tenant, path, methods):
    response = tenant.client.options(path)
    assert response.status_code == 200, response.text
    assert {m.strip() for m in response.headers["Allow"].split(",")} == methods


def test_a_method_of_the_id_route_on_a_fixed_path_is_not_allowed_there(tenant):
    response = tenant.patch("/contacts/activity", json={"first_name": "x"})
    assert_error(response, 405, "method_not_allowed")
    assert {m.strip() for m in response.headers["Allow"].split(",")} == {"GET", "HEAD", "OPTIONS"}
    # an id route still answers for an id of its shape, in any letter case
    contact = make_contact(tenant, "g@example.org")
    assert tenant.get(f"/contacts/{contact['id'].upper()}").json()["data"]["id"] == contact["id"]
    assert_error(tenant.get("/contacts/not-a-uuid"), 404, "not_found")
