"""The error envelope `{error: {code, message, path?}}` for every kind of failure."""

import json
import uuid

import httpx
import pytest

from tests.support.api import assert_error

SEND = {"to": "someone@example.org", "subject": "Hi", "text": "hello"}


def post_raw(tenant, path, content, content_type="application/json"):
    return tenant.client.post(path, content=content, headers={"Content-Type": content_type})


@pytest.mark.parametrize("content", [b"{", b"{'to': 1}", b'{"to": "a@b.c",}', b"nul", b"\xff\xfe"],
                         ids=["unterminated", "single-quotes", "trailing-comma", "bare-word", "not-utf8"])
def test_malformed_json_answers_400_validation_error(tenant, content):
    error = assert_error(post_raw(tenant, "/email/send", content), 400, "validation_error", no_path=True)
    assert "JSON" in error["message"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
def test_non_json_content_type_answers_400_validation_error(tenant, content_type):
    error = assert_error(post_raw(tenant, "/email/send", json.dumps(SEND).encode(), content_type),
                         400, "validation_error", no_path=True)
    assert "Content-Type" in error["message"]


def test_missing_content_type_answers_400(tenant):
    response = tenant.client.post("/email/send", content=json.dumps(SEND).encode())
    assert_error(response, 400, "validation_error", no_path=True)


def test_json_content_type_with_charset_is_accepted(tenant):
    response = post_raw(tenant, "/email/send", json.dumps(SEND).encode(), "application/json; charset=utf-8")
    assert response.status_code == 202, response.text


def test_empty_body_answers_400(tenant):
    assert_error(post_raw(tenant, "/email/send", b""), 400, "validation_error", no_path=True)


@pytest.mark.parametrize("content", [b"[]", b'["to"]', b'"text"', b"42", b"null", b"true"])
def test_body_that_is_not_an_object_answers_400(tenant, content):
    error = assert_error(post_raw(tenant, "/email/send", content), 400, "validation_error", no_path=True)
    assert "object" in error["message"]


@pytest.mark.parametrize("body, path", [
    ({**SEND, "colour": "blue"}, "colour"),
    ({**SEND, "From_Email": "a@b.c"}, "From_Email"),
])
def test_unknown_field_answers_400_with_its_path(tenant, body, path):
    error = assert_error(tenant.post("/email/send", json=body), 400, "validation_error", path)
    assert "Unknown field" in error["message"]


@pytest.mark.parametrize("body, path", [
    ({**SEND, "to": 5}, "to"),
    ({**SEND, "to": ["ok@example.org", 5]}, "to[1]"),
    ({**SEND, "subject": ["Hi"]}, "subject"),
    ({**SEND, "track_opens": "true"}, "track_opens"),
    ({**SEND, "track_clicks": 1}, "track_clicks"),
    ({**SEND, "template_data": "x"}, "template_data"),
    ({**SEND, "send_at": 1700000000}, "send_at"),
])
def test_wrong_type_answers_400_with_its_path(tenant, body, path):
    assert_error(tenant.post("/email/send", json=body), 400, "validation_error", path)


@pytest.mark.parametrize("missing", ["to", "subject"])
def test_missing_required_field_answers_400_with_its_path(tenant, missing):
    body = {k: v for k, v in SEND.items() if k != missing}
    error = assert_error(tenant.post("/email/send", json=body), 400, "validation_error", missing)
    assert "required" in error["message"].lower()


def test_invalid_address_and_over_long_fields_name_their_path(tenant):
    assert_error(tenant.post("/email/send", json={**SEND, "to": "not-an-address"}),
                 400, "validation_error", "to")
    assert_error(tenant.post("/email/send", json={**SEND, "subject": "s" * 999}),
                 400, "validation_error", "subject")
    assert_error(tenant.post("/email/send", json={**SEND, "to": [f"r{i}@example.org" for i in range(51)]}),
                 400, "validation_error", "to")


def test_unknown_api_route_answers_404_not_found(tenant):
    assert_error(tenant.get("/no-such-thing"), 404, "not_found", no_path=True)
    assert_error(tenant.post("/no/such/action", json={}), 404, "not_found", no_path=True)
    # /email/<message id> exists (DELETE), so POSTing to it is a wrong method, not an unknown route;
    # a path id of another shape than the resource's names no route (front/path_ids.py)
    assert_error(tenant.post(f"/email/msg_{'0' * 32}", json={}), 405, "method_not_allowed", no_path=True)
    assert_error(tenant.post("/email/some-id", json={}), 404, "not_found", no_path=True)


@pytest.mark.e2e
def test_unknown_api_route_answers_404_even_without_a_key(service):
    response = httpx.get(service.api + "/no-such-thing", timeout=30)
    assert_error(response, 404, "not_found", no_path=True)


@pytest.mark.e2e
def test_unknown_route_outside_the_api_answers_404_not_found(service):
    response = httpx.get(service.base_url + "/definitely/not/here", timeout=30)
    assert_error(response, 404, "not_found", no_path=True)


def test_wrong_method_answers_405_with_allow(tenant):
    response = tenant.get("/email/send")
    assert_error(response, 405, "method_not_allowed", no_path=True)
    assert "POST" in [m.strip() for m in response.headers["Allow"].split(",")]

    put = tenant.put(f"/email/msg_{'0' * 32}/status", json={})
    assert_error(put, 405, "method_not_allowed", no_path=True)
    assert "GET" in put.headers["Allow"]


@pytest.mark.e2e
def test_wrong_method_on_health_answers_405(service):
    response = httpx.post(service.api + "/health", json={}, timeout=30)
    assert_error(response, 405, "method_not_allowed", no_path=True)
    assert "GET" in response.headers["Allow"]


def test_oversize_body_answers_413_payload_too_large(service, tenant):
    limit = int(service.env.get("POSTROOM_MAX_REQUEST_BYTES", 32 * 1024 * 1024))
    body = b'{"to": "a@example.org", "subject": "big", "text": "' + b"x" * limit + b'"}'
    response = post_raw(tenant, "/email/send", body)
    assert_error(response, 413, "payload_too_large", no_path=True)


def test_oversize_html_names_its_path(tenant):
    html = "<p>" + "x" * (256 * 1024) + "</p>"
    response = tenant.post("/email/send", json={**SEND, "html": html})
    assert_error(response, 400, "validation_error", "html")


def test_no_content_and_missing_from_email_use_their_codes(service):
    tenant = service.tenant(from_email=None)
    no_content = tenant.post("/email/send", json={"to": "a@example.org", "subject": "Hi"})
    assert_error(no_content, 400, "no_content", no_path=True)
    no_from = tenant.post("/email/send", json=SEND)
    assert_error(no_from, 400, "missing_from_email", "from_email")


@pytest.mark.parametrize("number, path", [
    (b"1e999", "template_data.n"),
    (b"-1e999", "template_data.n"),
    (b"123456789012345678901234567890", "template_data.n"),
    (b"[1, 9223372036854775808]", "template_data.n[1]"),
])
def test_numbers_the_store_cannot_hold_answer_400_not_500(tenant, number, path):
    body = b'{"to": "a@example.org", "subject": "x", "text": "y", "template_data": {"n": ' + number + b"}}"
    assert_error(post_raw(tenant, "/email/send", body), 400, "validation_error", path)


def test_a_key_holding_nul_answers_400_not_500(tenant):
    # a BSON key is a C string; schemathesis found the store's refusal as a 500
    body = b'{"name": "T", "json_structure": {"blocks": [], "ui": {"a\\u0000b": 1}}}'
    assert_error(post_raw(tenant, "/templates", body), 400, "validation_error", "json_structure.ui.a\x00b")


def test_largest_storable_numbers_are_accepted(tenant):
    body = (b'{"to": "a@example.org", "subject": "x", "text": "y", "template_data": '
            b'{"big": 9223372036854775807, "small": -9223372036854775808, "real": 1.5e300}}')
    assert post_raw(tenant, "/email/send", body).status_code == 202


def test_an_unexpected_failure_answers_500_internal_error_without_internals(service, tenant):
    # A message document damaged in the store (no status, no subject) breaks the view.
    damaged = "msg_" + uuid.uuid4().hex

    async def damage(db):
        await db.messages.insert_one({"_id": damaged, "workspace_id": tenant.workspace_id})
    service.store.run(damage)
    response = tenant.get(f"/email/{damaged}/status")
    error = assert_error(response, 500, "internal_error", no_path=True)
    assert "retry" in error["message"]
    for leak in ("KeyError", 'File "', "site-packages", "message_status", "views.py"):
        assert leak not in response.text


def test_paths_with_encoded_or_doubled_slashes_answer_the_envelope_not_a_redirect(service, tenant):
    for path in ("/suppressions/%2F..%2F", "/contacts//", "/email//status"):
        response = tenant.get(path, follow_redirects=False) if "suppressions" not in path else \
            tenant.delete(path, follow_redirects=False)
        assert response.status_code in (404, 405), (path, response.status_code)
        assert response.headers["content-type"].startswith("application/json")
        assert "code" in response.json()["error"]


@pytest.mark.parametrize("status, code", [(400, "validation_error"), (404, "not_found"), (411, "validation_error"),
                                          (418, "validation_error"), (501, "internal_error"),
                                          (503, "internal_error")])
def test_statuses_without_a_name_of_their_own_map_to_their_class_of_failure(status, code):
    from front.errors import code_for_status
    assert code_for_status(status) == code


def test_half_a_utf16_pair_is_kept_as_a_replacement_character_not_refused_as_invalid_json(tenant):
    """`\\ud800` alone is valid JSON text (RFC 8259) that no store can keep: the text is
    taken with U+FFFD in its place; a whole pair is the character it encodes."""
    created = post_raw(tenant, "/templates", b'{"name": "Half \\ud800 and \\ud83d\\ude00", "html": "<p>x</p>"}')
    assert created.status_code == 201, created.text
    assert created.json()["data"]["name"] == "Half \ufffd and \U0001f600"
    wrong_type = post_raw(tenant, "/templates", b'{"name": "\\udc00", "html": 5}')
    assert_error(wrong_type, 400, "validation_error", "html")
