"""Inbound mail's API (issue 36): the workspace's inbound address, routes (validation of
every field, list, get, delete, permissions) and received messages (filters, cursor
pages, the parsed message, the raw download) — and the same cross-workspace matrix as
every resource: another workspace's route or message answers 404 everywhere and is never
listed."""

import re
import uuid

import pytest

from tests.front.test_webhooks import UNSENDABLE_URLS
from tests.support.api import assert_error
from tests.support.inbound_mail import address_of, mail, make_route, received

HOOK = "https://hooks.example.com/inbound"
UNKNOWN = "00000000-0000-4000-8000-000000000000"


# -- the address ------------------------------------------------------------------------------
def test_a_workspace_gets_one_random_inbound_address_on_the_operators_domain(service, tenant):
    first = tenant.get("/inbound/address")
    assert first.status_code == 200, first.text
    data = first.json()["data"]
    token, _, domain = data["address"].partition("@")
    assert domain == "inbound.postroom.test" == data["domain"]
    assert re.fullmatch(r"[a-z2-7]{16}", token) and tenant.workspace_id.replace("-", "") not in token
    assert data["tagged_example"] == f"{token}+ticket-42@{domain}"
    assert tenant.get("/inbound/address").json()["data"] == data  # made once, then kept
    assert service.tenant().get("/inbound/address").json()["data"]["address"] != data["address"]


# -- routes -------------------------------------------------------------------------------------
def test_creating_a_route_answers_201_with_its_secret_shown_once(tenant):
    created = tenant.post("/inbound/routes", json={"pattern": "Support+*@Inbound.Example", "url": HOOK,
                                                   "priority": 5, "description": "tickets"})
    assert created.status_code == 201, created.text
    route = created.json()["data"]
    assert route["pattern"] == "support+*@inbound.example" and route["url"] == HOOK
    assert route["priority"] == 5 and route["description"] == "tickets" and route["created_at"].endswith("Z")
    assert route["secret"].startswith("whsec_")
    shown = tenant.get(f"/inbound/routes/{route['id']}").json()["data"]
    assert shown == {k: v for k, v in route.items() if k != "secret"}
    assert [r["id"] for r in tenant.get("/inbound/routes").json()["data"]] == [route["id"]]


def test_routes_are_listed_in_the_order_they_are_tried(tenant):
    late = make_route(tenant, HOOK, "*")
    early = make_route(tenant, HOOK, "a@inbound.example", priority=1)
    same = make_route(tenant, HOOK, "b@inbound.example")
    answer = tenant.get("/inbound/routes", params={"limit": 2}).json()
    assert [r["id"] for r in answer["data"]] == [early["id"], late["id"]]
    assert answer["pagination"] == {"total": 3, "limit": 2, "offset": 0, "has_more": True}
    assert [r["id"] for r in tenant.get("/inbound/routes", params={"offset": 2}).json()["data"]] == [same["id"]]


@pytest.mark.parametrize("payload, path", [
    ({"url": HOOK}, "pattern"),
    ({"pattern": "*"}, "url"),
    ({"pattern": 5, "url": HOOK}, "pattern"),
    ({"pattern": None, "url": HOOK}, "pattern"),
    ({"pattern": "", "url": HOOK}, "pattern"),
    ({"pattern": "a" * 250 + "@x.example", "url": HOOK}, "pattern"),
    ({"pattern": "two words@x.example", "url": HOOK}, "pattern"),
    ({"pattern": "<a@x.example>", "url": HOOK}, "pattern"),
    ({"pattern": "a@x.example\r\nBcc: b@y.example", "url": HOOK}, "pattern"),
    ({"pattern": "no-at-sign", "url": HOOK}, "pattern"),
    ({"pattern": "*", "url": 7}, "url"),
    ({"pattern": "*", "url": ""}, "url"),
    ({"pattern": "*", "url": "ftp://hooks.example.com/x"}, "url"),
    ({"pattern": "*", "url": "https://user:pass@hooks.example.com/x"}, "url"),
    ({"pattern": "*", "url": "https://hooks.example.com/" + "x" * 2048}, "url"),
    ({"pattern": "*", "url": HOOK, "priority": -1}, "priority"),
    ({"pattern": "*", "url": HOOK, "priority": 1001}, "priority"),
    ({"pattern": "*", "url": HOOK, "priority": "1"}, "priority"),
    ({"pattern": "*", "url": HOOK, "priority": 1.5}, "priority"),
    ({"pattern": "*", "url": HOOK, "description": "d" * 201}, "description"),
    ({"pattern": "*", "url": HOOK, "secret": "mine"}, "secret"),
])
def test_invalid_route_bodies_name_the_offending_field_and_create_nothing(tenant, payload, path):
    assert_error(tenant.post("/inbound/routes", json=payload), 400, "validation_error", path)
    assert tenant.get("/inbound/routes").json()["data"] == []


def test_a_whole_priority_written_as_a_json_float_is_that_integer(tenant):
    assert make_route(tenant, HOOK, priority=7.0)["priority"] == 7


@pytest.mark.parametrize("url", UNSENDABLE_URLS)
def test_urls_the_sender_cannot_read_are_refused_as_for_webhooks(tenant, url):
    assert_error(tenant.post("/inbound/routes", json={"pattern": "*", "url": url}), 400, "validation_error", "url")


def test_a_route_body_must_be_a_json_object(tenant):
    assert_error(tenant.post("/inbound/routes", json=["*"]), 400, "validation_error")
    assert_error(tenant.client.post("/inbound/routes", content=b"pattern=*"), 400, "validation_error")


def test_rotating_a_routes_secret_replaces_it_at_once(service, tenant):
    from pipelines.core.secret_box import open_sealed
    route = make_route(tenant, HOOK)
    rotated = tenant.post(f"/inbound/routes/{route['id']}/rotate-secret")
    assert rotated.status_code == 200, rotated.text
    data = rotated.json()["data"]
    assert data["id"] == route["id"] and data["secret"].startswith("whsec_") and data["secret"] != route["secret"]
    stored = service.store.run(lambda db: db.inbound_routes.find_one({"_id": route["id"]}))
    assert open_sealed(stored["secret_sealed"], service.env["POSTROOM_SECRET_KEY"]) == data["secret"]
    assert_error(service.tenant().post(f"/inbound/routes/{route['id']}/rotate-secret"), 404, "not_found")
    tenant.delete(f"/inbound/routes/{route['id']}")
    assert_error(tenant.post(f"/inbound/routes/{route['id']}/rotate-secret"), 404, "not_found")


def test_deleting_a_route_removes_it_and_a_second_delete_is_404(tenant):
    route = make_route(tenant, HOOK)
    answer = tenant.delete(f"/inbound/routes/{route['id']}")
    assert answer.status_code == 200 and answer.json()["data"] == {"id": route["id"], "deleted": True}
    assert_error(tenant.get(f"/inbound/routes/{route['id']}"), 404, "not_found")
    assert_error(tenant.delete(f"/inbound/routes/{route['id']}"), 404, "not_found")
    assert tenant.get("/inbound/routes").json()["data"] == []


@pytest.mark.parametrize("path", [f"/inbound/routes/{UNKNOWN}", f"/inbound/messages/{UNKNOWN}",
                                  f"/inbound/messages/{UNKNOWN}/raw", "/inbound/routes/not-an-id",
                                  "/inbound/messages/not-an-id"])
def test_unknown_or_malformed_ids_answer_404(tenant, path):
    assert_error(tenant.get(path), 404, "not_found")


def test_permissions_are_the_inbound_area(service, tenant):
    reader = service.extra_key(tenant, permissions=["inbound:read"])
    other_area = service.extra_key(tenant, permissions=["webhooks:*"])
    assert reader.get("/inbound/routes").status_code == 200
    assert reader.get("/inbound/address").status_code == 200
    assert_error(reader.post("/inbound/routes", json={"pattern": "*", "url": HOOK}), 403, "forbidden")
    route = make_route(tenant, HOOK)
    assert_error(reader.delete(f"/inbound/routes/{route['id']}"), 403, "forbidden")
    for path in ("/inbound/routes", "/inbound/messages", "/inbound/address"):
        assert_error(other_area.get(path), 403, "forbidden")


# -- messages -----------------------------------------------------------------------------------
@pytest.fixture
def inbox(service, tenant):
    """Two messages received by the tenant: one taken by a route, one by none."""
    route = make_route(tenant, HOOK, address_of(tenant))
    first = received(service, tenant, mail(to=address_of(tenant), attachment=("notes.txt", "text/plain", b"hi")),
                     address_of(tenant, "ticket-42"))
    second = received(service, tenant, mail(sender="bob@other.example", to="x@y.example", subject="Other"),
                      f"nobody@{address_of(tenant).split('@')[1]}", mail_from="bob@other.example")
    return {"route": route, "first": first, "second": second}


def test_a_received_message_is_listed_and_shown_parsed_with_its_envelope_and_verdicts(service, tenant, inbox):
    listed = tenant.get("/inbound/messages").json()
    assert [m["id"] for m in listed["data"]] == [inbox["second"], inbox["first"]]
    first = listed["data"][1]
    assert first["recipient"] == address_of(tenant, "ticket-42") and first["tag"] == "ticket-42"
    assert first["from"] == "ann@sender.example" and first["subject"] == "Re: your ticket"
    assert first["route_id"] == inbox["route"]["id"] and first["status"] == "processed"
    assert listed["data"][0]["route_id"] is None  # matched no route: stored, listed, not delivered
    detail = tenant.get(f"/inbound/messages/{inbox['first']}").json()["data"]
    assert detail["envelope"] == {"mail_from": "ann@sender.example", "rcpt_to": address_of(tenant, "ticket-42"),
                                  "client_ip": "192.0.2.10", "helo": "mx.sender.example"}
    assert detail["message"]["from"]["address"] == "ann@sender.example"
    assert detail["message"]["text"].strip() == "Thanks, that worked."
    [attachment] = detail["message"]["attachments"]
    assert attachment["filename"] == "notes.txt" and attachment["size"] == 2 and "content_b64" not in attachment
    assert set(detail["authentication"]) >= {"spf", "dkim", "dmarc", "summary"}
    assert detail["authentication_summary"] == detail["authentication"]["summary"]


def test_the_raw_message_downloads_as_received(tenant, service):
    raw = mail(to=address_of(tenant), text="exactly these bytes\n")
    message_id = received(service, tenant, raw, address_of(tenant))
    answer = tenant.get(f"/inbound/messages/{message_id}/raw")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("message/rfc822")
    assert answer.headers["content-disposition"] == f'attachment; filename="{message_id}.eml"'
    assert answer.content == raw


def test_messages_are_filtered_by_route_recipient_sender_and_time(tenant, inbox):
    def ids(**params):
        return [m["id"] for m in tenant.get("/inbound/messages", params=params).json()["data"]]
    assert ids(route_id=inbox["route"]["id"]) == [inbox["first"]]
    assert ids(recipient=address_of(tenant, "TICKET-42").upper()) == [inbox["first"]]
    assert ids(**{"from": "BOB@other.example"}) == [inbox["second"]]
    assert ids(since="2000-01-01", until="2000-01-02") == []
    assert ids(since="2000-01-01") == [inbox["second"], inbox["first"]]
    assert ids(route_id=UNKNOWN) == []


def test_messages_page_by_cursor(tenant, inbox):
    first = tenant.get("/inbound/messages", params={"limit": 1}).json()
    assert first["pagination"]["has_more"] is True and first["pagination"]["total"] == 2
    after = tenant.get("/inbound/messages", params={"limit": 1, "cursor": first["pagination"]["next_cursor"]}).json()
    assert [m["id"] for m in first["data"] + after["data"]] == [inbox["second"], inbox["first"]]
    # as GET /email: a cursor's page says only whether it was full; the one after the last is empty
    end = tenant.get("/inbound/messages", params={"limit": 1, "cursor": after["pagination"]["next_cursor"]}).json()
    assert end["data"] == [] and end["pagination"]["next_cursor"] is None and end["pagination"]["has_more"] is False


@pytest.mark.parametrize("params, path", [
    ({"route_id": "nope"}, "route_id"), ({"since": "yesterday"}, "since"), ({"until": ""}, "until"),
    ({"since": "2026-03-02", "until": "2026-03-01"}, "until"), ({"cursor": "not-ours"}, "cursor"),
    ({"cursor": "MTox", "offset": 1}, "offset"), ({"limit": 0}, "limit"), ({"recipient": "a" * 300}, "recipient"),
])
def test_bad_message_filters_name_their_parameter(tenant, params, path):
    assert_error(tenant.get("/inbound/messages", params=params), 400, "validation_error", path)


# -- another workspace --------------------------------------------------------------------------
def test_another_workspace_neither_sees_nor_touches_routes_or_messages(service, tenant, inbox):
    other = service.tenant()
    route_id, message_id = inbox["route"]["id"], inbox["first"]
    for response in (other.get(f"/inbound/routes/{route_id}"), other.delete(f"/inbound/routes/{route_id}"),
                     other.post(f"/inbound/routes/{route_id}/rotate-secret"),
                     other.get(f"/inbound/messages/{message_id}"), other.get(f"/inbound/messages/{message_id}/raw")):
        assert_error(response, 404, "not_found")
    assert other.get("/inbound/routes").json()["pagination"]["total"] == 0
    assert other.get("/inbound/messages").json()["pagination"]["total"] == 0
    assert other.get("/inbound/messages", params={"route_id": route_id}).json()["data"] == []
    assert other.get("/inbound/messages", params={"recipient": address_of(tenant, "ticket-42")}).json()["data"] == []
    # and the owner still has both
    assert tenant.get(f"/inbound/routes/{route_id}").status_code == 200
    assert tenant.get(f"/inbound/messages/{message_id}").status_code == 200


def test_a_route_of_another_workspace_never_takes_this_workspaces_mail(service, tenant):
    other = service.tenant()
    theirs = make_route(other, HOOK, "*")
    message_id = received(service, tenant, mail(to=address_of(tenant)), address_of(tenant))
    assert tenant.get(f"/inbound/messages/{message_id}").json()["data"]["route_id"] is None

    async def deliveries(db):
        return await db.webhook_deliveries.find({"webhook_id": theirs["id"]}).to_list()
    assert service.store.run(deliveries) == []


def test_mail_to_an_address_shaped_like_a_token_finds_no_workspace(service):
    from pipelines.core.settings import Settings
    from pipelines.workflows.receive_inbound import workspace_for
    made_up = f"{uuid.uuid4().hex[:16]}@inbound.postroom.test"
    assert service.store.run(workspace_for, Settings(), made_up) is None


# -- inbound domains ----------------------------------------------------------------------------
def publish(dns_server, domain: dict, *, mx: str | None = None, txt: bool = True) -> None:
    by_purpose = {r["purpose"]: r for r in domain["dns_records"]}
    if txt:
        dns_server.set(by_purpose["verification"]["name"], "TXT", by_purpose["verification"]["value"])
    mx_record = by_purpose["inbound_mx"]
    dns_server.set(mx_record["name"], "MX", f"{mx_record['priority']} {mx or mx_record['value']}")


def add_domain(tenant, name: str) -> dict:
    response = tenant.post("/inbound/domains", json={"domain": name})
    assert response.status_code == 201, response.text
    return response.json()["data"]


def test_an_inbound_domain_lists_its_mx_and_verification_records(tenant):
    name = f"replies-{uuid.uuid4().hex[:6]}.acme.example"
    domain = add_domain(tenant, name.upper() + ".")
    assert domain["domain"] == name and domain["verified"] is False and domain["verified_at"] is None
    by_purpose = {r["purpose"]: r for r in domain["dns_records"]}
    assert by_purpose["inbound_mx"] | {"status": "pending"} == {
        "type": "MX", "name": name, "value": "inbound.postroom.test", "priority": 10, "purpose": "inbound_mx",
        "verified": False, "status": "pending"}
    assert by_purpose["verification"]["name"] == f"_postroom-inbound.{name}"
    assert tenant.get(f"/inbound/domains/{domain['id']}").json()["data"] == domain
    assert [d["id"] for d in tenant.get("/inbound/domains").json()["data"]] == [domain["id"]]
    assert_error(tenant.post("/inbound/domains", json={"domain": name}), 409, "duplicate", "domain")


@pytest.mark.parametrize("payload, path", [({}, "domain"), ({"domain": 5}, "domain"), ({"domain": "no spaces.x"},
                                           "domain"), ({"domain": "inbound.postroom.test"}, "domain"),
                                           ({"domain": "x.inbound.postroom.test"}, "domain"),
                                           ({"domain": "bounces.postroom.test"}, "domain"),
                                           ({"domain": "a.example", "mx": "x"}, "mx")])
def test_invalid_inbound_domains_are_refused_with_their_path(tenant, payload, path):
    assert_error(tenant.post("/inbound/domains", json=payload), 400, "validation_error", path)


def test_a_verified_domain_receives_for_its_workspace_and_only_the_first_to_prove_it(service, tenant, dns_server):
    from pipelines.core.settings import Settings
    from pipelines.workflows.receive_inbound import workspace_for
    name = f"replies-{uuid.uuid4().hex[:6]}.acme.example"
    domain = add_domain(tenant, name)
    publish(dns_server, domain, mx="mx.elsewhere.example")
    checked = tenant.post(f"/inbound/domains/{domain['id']}/verify").json()["data"]
    assert checked["verified"] is False and checked["failed_records"] == ["inbound_mx"]
    assert service.store.run(workspace_for, Settings(), f"anyone@{name}") is None
    publish(dns_server, domain)
    checked = tenant.post(f"/inbound/domains/{domain['id']}/verify").json()["data"]
    assert checked["verified"] is True and checked["failed_records"] == [] and checked["verified_at"]
    assert service.store.run(workspace_for, Settings(), f"Anyone+7@{name.upper()}") == tenant.workspace_id

    # another workspace naming the same domain cannot take it, even with its own TXT published
    other = service.tenant()
    theirs = add_domain(other, name)
    publish(dns_server, theirs)
    assert_error(other.post(f"/inbound/domains/{theirs['id']}/verify"), 409, "conflict", "domain")
    assert service.store.run(workspace_for, Settings(), f"anyone@{name}") == tenant.workspace_id
    for response in (other.get(f"/inbound/domains/{domain['id']}"), other.delete(f"/inbound/domains/{domain['id']}"),
                     other.post(f"/inbound/domains/{domain['id']}/verify")):
        assert_error(response, 404, "not_found")

    # removed: its mail is refused again
    assert tenant.delete(f"/inbound/domains/{domain['id']}").json()["data"] == {"id": domain["id"], "deleted": True}
    assert service.store.run(workspace_for, Settings(), f"anyone@{name}") is None
    assert_error(tenant.get(f"/inbound/domains/{domain['id']}"), 404, "not_found")


# -- auto-replies and retention -----------------------------------------------------------------
def test_an_auto_reply_is_stored_and_marked_and_nothing_answers_it(service, tenant):
    make_route(tenant, HOOK)
    raw = mail(to=address_of(tenant), subject="Out of office", headers={"Auto-Submitted": "auto-replied"})
    message_id = received(service, tenant, raw, address_of(tenant))
    shown = tenant.get(f"/inbound/messages/{message_id}").json()["data"]
    assert shown["auto_submitted"] is True and shown["message"]["auto_submitted"] is True

    async def sent_to_sender(db):  # we never write mail back to whoever sent it
        return await db.messages.count_documents({"workspace_id": tenant.workspace_id})
    assert service.store.run(sent_to_sender) == 0


def test_retention_deletes_old_messages_with_their_raw_bytes(service, tenant):
    from pipelines.core.settings import Settings
    from pipelines.workflows.receive_inbound import apply_retention
    old = received(service, tenant, mail(to=address_of(tenant)), address_of(tenant))
    new = received(service, tenant, mail(to=address_of(tenant)), address_of(tenant))

    async def age(db):
        await db.inbound_messages.update_one({"_id": old}, {"$inc": {"received_ms": -31 * 86_400_000}})
    service.store.run(age)
    assert service.store.run(apply_retention, Settings(inbound_retention_days=30)) >= 1
    assert_error(tenant.get(f"/inbound/messages/{old}"), 404, "not_found")
    assert service.store.run(lambda db: db.inbound_raw.find_one({"_id": f"{old}:0"})) is None
    assert tenant.get(f"/inbound/messages/{new}/raw").status_code == 200
