"""Webhook subscription endpoints against the real front: both subscription forms,
listing, deletion, secret rotation, the test operation against a real receiver, and every
error the spec names (400 validation_error with path, 404 for unknown and foreign ids)."""

import pytest

from tests.support.api import assert_error
from tests.support.http_receiver import HttpReceiver

EVENTS = ["contact.created", "contact.updated", "contact.subscribed", "contact.unsubscribed",
          "campaign.sent", "campaign.completed", "email.sent", "email.delivered", "email.opened",
          "email.clicked", "email.bounced", "email.complained", "flow.triggered", "flow.completed",
          "form.submitted", "conversion.created", "list.member_added", "list.member_removed",
          "email.received"]


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


def subscribe(tenant, url="https://hooks.example.com/in", event="contact.created"):
    response = tenant.post("/webhooks/triggers", json={"targetUrl": url, "event": event})
    assert response.status_code == 201, response.text
    return response.json()["data"]


# -- POST /webhooks/triggers -------------------------------------------------------------
def test_creating_a_trigger_returns_the_spec_shape_and_a_secret_shown_once(tenant):
    data = subscribe(tenant, "https://hooks.example.com/postroom?x=1", "list.member_added")
    assert data["event"] == "list.member_added"
    assert data["targetUrl"] == "https://hooks.example.com/postroom?x=1"
    assert data["id"] and data["createdAt"].endswith("Z")
    assert data["secret"].startswith("whsec_") and len(data["secret"]) == 49
    listed = tenant.get("/webhooks/triggers").json()["data"]
    assert [w["id"] for w in listed] == [data["id"]]
    assert "secret" not in listed[0] and "secret" not in tenant.get(f"/webhooks/{data['id']}").json()["data"]


def test_every_event_type_of_the_spec_can_be_subscribed(tenant):
    for event in EVENTS:
        assert subscribe(tenant, event=event)["event"] == event
    assert tenant.get("/webhooks/triggers").json()["pagination"]["total"] == 19  # the spec's 18 and email.received


def test_the_secret_is_stored_encrypted(service, tenant):
    data = subscribe(tenant)

    async def stored(db):
        return await db.webhooks.find_one({"_id": data["id"]})
    doc = service.store.run(stored)
    assert data["secret"] not in str(doc)
    assert doc["secret_sealed"]


@pytest.mark.parametrize("payload, path", [
    ({"event": "contact.created"}, "targetUrl"),
    ({"targetUrl": "https://h.example/x"}, "event"),
    ({"targetUrl": "https://h.example/x", "event": "contact.deleted"}, "event"),
    ({"targetUrl": "https://h.example/x", "event": 5}, "event"),
    ({"targetUrl": ["https://h.example/x"], "event": "contact.created"}, "targetUrl"),
    ({"targetUrl": "ftp://h.example/x", "event": "contact.created"}, "targetUrl"),
    ({"targetUrl": "not a url", "event": "contact.created"}, "targetUrl"),
    ({"targetUrl": "https://user:pw@h.example/x", "event": "contact.created"}, "targetUrl"),
    ({"targetUrl": "", "event": "contact.created"}, "targetUrl"),
    ({"targetUrl": "https://h.example/" + "a" * 2031, "event": "contact.created"}, "targetUrl"),
    ({"targetUrl": "https://h.example/x", "event": "contact.created", "secret": "mine"}, "secret"),
])
def test_invalid_trigger_bodies_name_the_offending_field(tenant, payload, path):
    assert_error(tenant.post("/webhooks/triggers", json=payload), 400, "validation_error", path)
    assert tenant.get("/webhooks/triggers").json()["data"] == []


# Read by resolvers as another address, or not readable by the parser that sends (httpx):
# each was created with 201 once, and then every delivery attempt raised.
UNSENDABLE_URLS = ["http://0177.0.0.1:18150/", "http://127.000.000.001:18150/", "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ:18150/",
                   "http://ｌｏｃａｌｈｏｓｔ:18150/", "http://0x7f.1:18150/", "http://127.1:18150/",
                   "http://2130706433:18150/", "http://[fe80::1%25lo]:18150/", "http://h.example:99999/",
                   "http://h.example\\@127.0.0.1/"]


@pytest.mark.parametrize("url", UNSENDABLE_URLS)
def test_urls_the_sender_cannot_read_are_refused_at_creation_in_both_forms(tenant, url):
    """The suite's front allows private targets, so these are refused for their form alone."""
    assert_error(tenant.post("/webhooks/triggers", json={"targetUrl": url, "event": "contact.created"}),
                 400, "validation_error", "targetUrl")
    assert_error(tenant.post("/webhooks", json={"url": url, "events": ["contact.created"]}),
                 400, "validation_error", "url")
    assert tenant.get("/webhooks/triggers").json()["data"] == []


def test_a_target_url_of_exactly_2048_characters_is_accepted(tenant):
    url = "https://h.example/" + "a" * (2048 - len("https://h.example/"))
    assert subscribe(tenant, url)["targetUrl"] == url


def test_malformed_json_and_non_object_bodies_are_refused(tenant):
    response = tenant.post("/webhooks/triggers", content=b'{"targetUrl": ',
                           headers={"Content-Type": "application/json"})
    assert_error(response, 400, "validation_error")
    response = tenant.post("/webhooks/triggers", json=["https://h.example/x"])
    assert_error(response, 400, "validation_error")


# -- GET /webhooks/triggers --------------------------------------------------------------
def test_listing_pages_newest_first_and_filters_by_event(tenant):
    ids = [subscribe(tenant, event=e)["id"] for e in ("contact.created", "email.sent", "contact.created")]
    body = tenant.get("/webhooks/triggers", params={"limit": 2}).json()
    assert body["pagination"] == {"total": 3, "limit": 2, "offset": 0, "has_more": True}
    rest = tenant.get("/webhooks/triggers", params={"limit": 2, "offset": 2}).json()
    assert {w["id"] for w in body["data"] + rest["data"]} == set(ids)
    assert body["data"][0]["createdAt"] >= body["data"][1]["createdAt"] >= rest["data"][0]["createdAt"]
    created = tenant.get("/webhooks/triggers", params={"event": "contact.created"}).json()
    assert {w["id"] for w in created["data"]} == {ids[0], ids[2]}


def test_a_list_filtered_by_event_names_that_event_for_a_multi_event_subscription(tenant):
    both = tenant.post("/webhooks", json={"url": "https://hooks.example.com/in",
                                          "events": ["email.sent", "email.bounced"]}).json()["data"]
    [listed] = tenant.get("/webhooks/triggers", params={"event": "email.bounced"}).json()["data"]
    assert listed["id"] == both["id"] and listed["event"] == "email.bounced"
    assert listed["events"] == ["email.sent", "email.bounced"]
    [unfiltered] = tenant.get("/webhooks/triggers").json()["data"]
    assert unfiltered["event"] == "email.sent"


@pytest.mark.parametrize("params, path", [({"event": "nope"}, "event"), ({"limit": 0}, "limit"),
                                          ({"limit": 1001}, "limit"), ({"offset": -1}, "offset")])
def test_listing_refuses_bad_query_parameters(tenant, params, path):
    assert_error(tenant.get("/webhooks/triggers", params=params), 400, "validation_error", path)


def test_another_workspace_sees_none_of_these_subscriptions(service, tenant):
    subscribe(tenant)
    assert service.tenant().get("/webhooks/triggers").json()["pagination"]["total"] == 0


# -- DELETE /webhooks/triggers?id= and DELETE /webhooks/:id -----------------------------
def test_deleting_a_trigger_removes_it_and_a_second_delete_is_404(tenant):
    data = subscribe(tenant)
    response = tenant.delete("/webhooks/triggers", params={"id": data["id"]})
    assert response.status_code == 200 and response.json() == {"data": {"success": True}}
    assert tenant.get("/webhooks/triggers").json()["data"] == []
    assert tenant.get(f"/webhooks/{data['id']}").status_code == 404
    again = tenant.delete("/webhooks/triggers", params={"id": data["id"]})
    assert_error(again, 404, "not_found")


def test_deleting_a_trigger_needs_an_id(tenant):
    assert_error(tenant.delete("/webhooks/triggers"), 400, "validation_error", "id")
    assert_error(tenant.delete("/webhooks/triggers", params={"id": ""}), 400, "validation_error", "id")


def test_another_workspace_cannot_delete_or_see_a_subscription(service, tenant):
    data = subscribe(tenant)
    other = service.tenant()
    for response in (other.delete("/webhooks/triggers", params={"id": data["id"]}),
                     other.delete(f"/webhooks/{data['id']}"), other.get(f"/webhooks/{data['id']}"),
                     other.post(f"/webhooks/{data['id']}/rotate-secret"),
                     other.post(f"/webhooks/{data['id']}/test"),
                     other.get(f"/webhooks/{data['id']}/deliveries")):
        assert_error(response, 404, "not_found")
    assert [w["id"] for w in tenant.get("/webhooks/triggers").json()["data"]] == [data["id"]]


@pytest.mark.parametrize("call", [
    lambda t: t.delete("/webhooks/triggers", params={"id": "00000000-0000-4000-8000-000000000000"}),
    lambda t: t.delete("/webhooks/00000000-0000-4000-8000-000000000000"),
    lambda t: t.get("/webhooks/00000000-0000-4000-8000-000000000000"),
    lambda t: t.post("/webhooks/00000000-0000-4000-8000-000000000000/rotate-secret"),
    lambda t: t.post("/webhooks/00000000-0000-4000-8000-000000000000/test"),
    lambda t: t.get("/webhooks/00000000-0000-4000-8000-000000000000/deliveries"),
])
def test_unknown_subscription_ids_answer_404(tenant, call):
    response = call(tenant)
    assert_error(response, 404, "not_found")


# -- POST /webhooks (second form) ---------------------------------------------------------
def test_the_second_form_makes_one_subscription_for_several_events(tenant):
    response = tenant.post("/webhooks", json={"url": "https://h.example/in",
                                              "events": ["email.sent", "email.bounced", "email.sent"]})
    assert response.status_code == 201, response.text
    data = response.json()["data"]
    assert data["events"] == ["email.sent", "email.bounced"] and data["event"] == "email.sent"
    assert data["url"] == data["targetUrl"] == "https://h.example/in"
    assert data["secret"].startswith("whsec_")
    assert tenant.get("/webhooks/triggers", params={"event": "email.bounced"}).json()["data"][0]["id"] == data["id"]
    response = tenant.delete(f"/webhooks/{data['id']}")
    assert response.status_code == 200 and response.json() == {"data": {"success": True}}
    assert tenant.get("/webhooks/triggers").json()["pagination"]["total"] == 0


@pytest.mark.parametrize("payload, path", [
    ({"events": ["email.sent"]}, "url"),
    ({"url": "https://h.example/in"}, "events"),
    ({"url": "https://h.example/in", "events": []}, "events"),
    ({"url": "https://h.example/in", "events": "email.sent"}, "events"),
    ({"url": "https://h.example/in", "events": ["email.sent", "email.nope"]}, "events[1]"),
    ({"url": "https://h.example/in", "events": EVENTS + ["email.sent"]}, "events"),
    ({"url": "javascript:alert(1)", "events": ["email.sent"]}, "url"),
    ({"url": "https://h.example/in", "events": ["email.sent"], "targetUrl": "x"}, "targetUrl"),
])
def test_invalid_second_form_bodies_name_the_offending_field(tenant, payload, path):
    assert_error(tenant.post("/webhooks", json=payload), 400, "validation_error", path)


# -- rotation -------------------------------------------------------------------------------
def test_rotating_the_secret_returns_a_new_one_that_signs_from_then_on(tenant, receiver):
    data = subscribe(tenant, receiver.url)
    response = tenant.post(f"/webhooks/{data['id']}/rotate-secret")
    assert response.status_code == 200, response.text
    rotated = response.json()["data"]
    assert rotated["id"] == data["id"] and rotated["secret"].startswith("whsec_")
    assert rotated["secret"] != data["secret"] and rotated["rotatedAt"] >= data["createdAt"]
    assert tenant.post(f"/webhooks/{data['id']}/test").json()["data"]["success"] is True
    [request] = receiver.received()
    verify = receiver.verify
    assert verify(rotated["secret"], request.headers["x-service-signature"], request.body)
    assert not verify(data["secret"], request.headers["x-service-signature"], request.body)


# -- POST /webhooks/:id/test -----------------------------------------------------------------
def test_the_test_operation_sends_a_signed_test_event_and_reports_status_and_time(tenant, receiver):
    data = subscribe(tenant, receiver.url)
    receiver.trust(data["id"], data["secret"])
    receiver.delay_seconds = 0.2
    response = tenant.post(f"/webhooks/{data['id']}/test")
    assert response.status_code == 200, response.text
    result = response.json()["data"]
    assert result["success"] is True and result["status_code"] == 200
    assert isinstance(result["response_time_ms"], int) and result["response_time_ms"] >= 200
    [request] = receiver.received()
    assert request.verified is True
    assert request.headers["x-service-event"] == "webhook.test"
    assert request.headers["x-service-webhook-id"] == data["id"]
    assert request.headers["x-service-delivery-id"].startswith("test_")
    assert request.headers["content-type"] == "application/json"
    assert request.json["event"] == "webhook.test"
    assert request.json["data"] == {"webhook_id": data["id"], "test": True}


def test_the_test_operation_reports_a_failing_receiver(tenant, receiver):
    data = subscribe(tenant, receiver.url)
    receiver.fail_next(1, status=503)
    result = tenant.post(f"/webhooks/{data['id']}/test").json()["data"]
    assert result["success"] is False and result["status_code"] == 503


def test_the_test_operation_reports_status_zero_when_nothing_answers(tenant, receiver):
    data = subscribe(tenant, receiver.url)
    receiver.stop()
    result = tenant.post(f"/webhooks/{data['id']}/test").json()["data"]
    assert result["success"] is False and result["status_code"] == 0 and result["error"]
    assert set(result) == {"success", "status_code", "response_time_ms", "error"}
    assert result["response_time_ms"] >= 0


@pytest.mark.e2e
def test_a_front_without_the_private_targets_setting_refuses_loopback_receivers(service, tenant, receiver):
    """The suite's own front allows loopback (its receivers live there); a front started as
    an operator would, without POSTROOM_ALLOW_PRIVATE_TARGETS, refuses them: literal
    addresses at subscription time, names that resolve to them when sending."""
    import httpx

    from tests.support.services import another_front
    by_name = subscribe(tenant, receiver.url.replace("127.0.0.1", "localhost"))
    strict_env = {k: v for k, v in service.env.items() if k != "POSTROOM_ALLOW_PRIVATE_TARGETS"}
    with another_front("front-strict", strict_env, service.log_dir) as base_url, \
            httpx.Client(base_url=base_url + "/api/v1", timeout=30, headers=tenant.client.headers) as strict:
        for url in (receiver.url, "http://10.0.0.8/hook", "http://169.254.169.254/latest/meta-data",
                    "http://[::1]:8080/hook", "http://[fec0::1]/hook", "http://192.88.99.1/hook",
                    "http://[3fff::1]/hook", "http://[::ffff:127.0.0.1]/hook", "http://LOCALHOST./hook"):
            assert_error(strict.post("/webhooks/triggers", json={"targetUrl": url, "event": "contact.created"}),
                         400, "validation_error", "targetUrl")
        result = strict.post(f"/webhooks/{by_name['id']}/test").json()["data"]
    # refused, and the answer does not say what the name resolved to
    assert result == {**result, "success": False, "status_code": 0, "error": "refused: not a public address"}
    assert receiver.requests == []  # nothing reached the loopback receiver


@pytest.mark.parametrize("url", UNSENDABLE_URLS[:4])
def test_the_test_operation_on_a_stored_url_the_sender_cannot_read_reports_a_refusal(service, tenant, url):
    """A subscription stored before creation used the sender's parser: 200 with the
    refusal, never a 500."""
    data = subscribe(tenant)

    async def store_url(db):
        await db.webhooks.update_one({"_id": data["id"]}, {"$set": {"target_url": url}})
    service.store.run(store_url)
    response = tenant.post(f"/webhooks/{data['id']}/test")
    assert response.status_code == 200, response.text
    result = response.json()["data"]
    assert result["success"] is False and result["status_code"] == 0
    assert result["error"].startswith("refused: the URL ")


# -- GET /webhooks/:id/deliveries ------------------------------------------------------------
def test_a_new_subscription_has_an_empty_delivery_log(tenant):
    data = subscribe(tenant)
    body = tenant.get(f"/webhooks/{data['id']}/deliveries").json()
    assert body == {"data": [], "pagination": {"total": 0, "limit": 100, "offset": 0, "has_more": False}}


def test_the_delivery_log_refuses_an_unknown_status(tenant):
    data = subscribe(tenant)
    assert_error(tenant.get(f"/webhooks/{data['id']}/deliveries", params={"status": "lost"}),
                 400, "validation_error", "status")


# -- permissions --------------------------------------------------------------------------------
def test_a_read_only_key_can_list_but_not_subscribe(service, tenant):
    reader = service.extra_key(tenant, permissions=["webhooks:read"])
    assert reader.get("/webhooks/triggers").status_code == 200
    response = reader.post("/webhooks/triggers", json={"targetUrl": "https://h.example/x",
                                                       "event": "contact.created"})
    assert_error(response, 403, "forbidden")
