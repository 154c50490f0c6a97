"""POST /email/send, POST /email/batch, GET /email/batch/:id, GET /email/:id/status and
DELETE /email/:id over real HTTP: every field, rule and error the spec lists."""

import datetime as dt
import uuid

import pytest

from pipelines.core.clock import iso, utcnow
from tests.support.api import assert_error, month_used
from tests.support.api import stored_message as stored
from tests.support.api import unique_address as address

HTML = "<p>Hello</p>"


def count_messages(service, workspace_id):
    async def count(db):
        return len(await db.messages.find({"workspace_id": workspace_id}, {"_id": 1}).to_list())
    return service.store.run(count)


# --- POST /email/send -------------------------------------------------------------

def test_send_to_one_address_answers_202_queued(tenant):
    to = address()
    response = tenant.post("/email/send", json={"to": to, "subject": "Hi", "html": HTML})
    assert response.status_code == 202, response.text
    data = response.json()["data"]
    assert data["status"] == "queued" and data["to"] == [to] and data["sandbox"] is False
    assert data["message_id"].startswith("msg_")


def test_send_to_a_list_puts_every_address_on_one_message(tenant):
    recipients = [address("a"), address("b")]
    response = tenant.post("/email/send", json={"to": recipients, "subject": "Hi", "text": "x"})
    assert response.status_code == 202
    assert response.json()["data"]["to"] == recipients


def test_send_to_more_than_50_addresses_is_refused(tenant):
    response = tenant.post("/email/send", json={"to": [address() for _ in range(51)], "subject": "Hi",
                                                "text": "x"})
    assert_error(response, 400, "validation_error", "to")


@pytest.mark.parametrize("field, value, path", [
    ("to", "not-an-address", "to"),
    ("to", ["ok@example.org", "broken"], "to[1]"),
    ("subject", "", "subject"),
    ("subject", 5, "subject"),
    ("track_opens", "true", "track_opens"),
    ("track_clicks", 1, "track_clicks"),
    ("reply_to", "nope", "reply_to"),
    ("from_email", "nope", "from_email"),
    ("from_name", "x" * 201, "from_name"),
    ("from_name", "Acme\r\nBcc: victim@example.org", "from_name"),
    ("from_name", "Acme\nX", "from_name"),
    ("from_name", "Acme\x00", "from_name"),
    ("from_name", "Acme\u2028X", "from_name"),
    ("template_data", [1], "template_data"),
    ("send_at", "tomorrow", "send_at"),
    ("bcc", "nope", "bcc"),
    ("priority", "high", "priority"),
])
def test_send_with_a_bad_field_names_it(tenant, field, value, path):
    body = {"to": address(), "subject": "Hi", "html": HTML, field: value}
    response = tenant.post("/email/send", json=body)
    assert_error(response, 400, "validation_error", path)


@pytest.mark.parametrize("missing", ["to", "subject"])
def test_send_without_a_required_field_is_refused(tenant, missing):
    body = {"to": address(), "subject": "Hi", "html": HTML}
    del body[missing]
    response = tenant.post("/email/send", json=body)
    assert_error(response, 400, "validation_error", missing)


def test_send_with_malformed_json_is_a_validation_error(tenant):
    response = tenant.client.post("/email/send", content=b'{"to": ', headers={"Content-Type": "application/json"})
    assert_error(response, 400, "validation_error")


def test_send_without_content_answers_no_content(tenant):
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi"})
    assert_error(response, 400, "no_content")


def test_send_with_html_over_256_kb_is_refused(tenant):
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi",
                                                "html": "<p>" + "x" * (256 * 1024) + "</p>"})
    assert_error(response, 400, "validation_error", "html")


def test_send_with_html_of_exactly_256_kb_is_accepted(tenant):
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi",
                                                "html": "x" * (256 * 1024)})
    assert response.status_code == 202


def test_send_without_from_email_and_no_workspace_default_answers_missing_from_email(service):
    tenant = service.tenant(from_email=None)
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi", "html": HTML})
    assert_error(response, 400, "missing_from_email")


def test_send_from_an_unverified_domain_of_the_workspace_answers_domain_invalid(service, tenant):
    async def add_domain(db):
        await db.domains.insert_one({"_id": str(uuid.uuid4()), "workspace_id": tenant.workspace_id,
                                     "domain": "pending.example", "verified": False})
    service.store.run(add_domain)
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi", "html": HTML,
                                                "from_email": "news@pending.example"})
    assert_error(response, 403, "domain_invalid")


def test_send_strips_tags_from_the_subject_and_stores_tracking_choices(service, tenant):
    response = tenant.post("/email/send", json={"to": address(), "subject": "<h1>Big</h1> <i>news</i>",
                                                "html": HTML, "track_opens": True, "track_clicks": False})
    message_id = response.json()["data"]["message_id"]
    status = tenant.get(f"/email/{message_id}/status").json()["data"]
    assert status["subject"] == "Big news"
    doc = stored(service, message_id)
    assert doc["track_opens"] is True and doc["track_clicks"] is False


def test_a_from_name_with_accents_and_quotes_is_accepted_as_is(service, tenant):
    name = 'Zoë "Ops" Team — Ünïcode'
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi", "text": "x", "from_name": name})
    assert response.status_code == 202, response.text
    assert stored(service, response.json()["data"]["message_id"])["from_name"] == name


def test_send_from_name_and_reply_to_are_kept(service, tenant):
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi", "html": HTML,
                                                "from_name": "Acme", "from_email": "hello@acme.example",
                                                "reply_to": "help@acme.example"})
    doc = stored(service, response.json()["data"]["message_id"])
    assert doc["from_name"] == "Acme" and doc["reply_to"] == "help@acme.example"


# --- scheduling ---------------------------------------------------------------------

def test_send_at_in_the_past_is_an_invalid_schedule(tenant):
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi", "html": HTML,
                                                "send_at": iso(utcnow() - dt.timedelta(minutes=1))})
    assert_error(response, 400, "invalid_schedule", "send_at")


def test_send_at_beyond_72_hours_is_an_invalid_schedule(tenant):
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi", "html": HTML,
                                                "send_at": iso(utcnow() + dt.timedelta(hours=72, minutes=5))})
    assert_error(response, 400, "invalid_schedule")


def test_send_at_within_72_hours_answers_scheduled(tenant):
    when = utcnow() + dt.timedelta(hours=71)
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi", "html": HTML,
                                                "send_at": when.isoformat()})
    assert response.status_code == 201, response.text
    data = response.json()["data"]
    assert data["scheduled"] is True and data["scheduled_at"] == iso(when)
    status = tenant.get(f"/email/{data['message_id']}/status").json()["data"]
    assert status["status"] == "scheduled" and status["scheduled_at"] == iso(when)


def test_cancel_of_a_scheduled_email_answers_cancelled_and_repeats_harmlessly(tenant):
    response = tenant.post("/email/send", json={"to": address(), "subject": "Hi", "html": HTML,
                                                "send_at": iso(utcnow() + dt.timedelta(hours=1))})
    message_id = response.json()["data"]["message_id"]
    first = tenant.delete(f"/email/{message_id}")
    assert first.status_code == 200 and first.json()["data"]["status"] == "cancelled"
    assert tenant.delete(f"/email/{message_id}").status_code == 200
    status = tenant.get(f"/email/{message_id}/status").json()["data"]
    assert status["status"] == "cancelled" and status["cancelled_at"]


def test_cancel_of_an_email_sent_now_is_a_conflict(tenant):
    message_id = tenant.post("/email/send", json={"to": address(), "subject": "Hi",
                                                  "html": HTML}).json()["data"]["message_id"]
    response = tenant.delete(f"/email/{message_id}")
    assert_error(response, 409, "conflict")


def test_unknown_and_foreign_messages_answer_404(service, tenant):
    other = service.tenant()
    message_id = other.post("/email/send", json={"to": address(), "subject": "Hi",
                                                 "html": HTML}).json()["data"]["message_id"]
    for path in (f"/email/{message_id}/status", "/email/msg_nope/status"):
        assert tenant.get(path).status_code == 404
    assert tenant.delete(f"/email/{message_id}").status_code == 404


# --- idempotency ----------------------------------------------------------------------

def test_send_replayed_with_the_same_idempotency_key_returns_the_same_message(service, tenant):
    body = {"to": address(), "subject": "Hi", "html": HTML}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    first = tenant.post("/email/send", json=body, headers=headers)
    again = tenant.post("/email/send", json=body, headers=headers)
    assert first.headers["X-Idempotency-Status"] == "new"
    assert again.headers["X-Idempotency-Status"] == "cached"
    assert again.json() == first.json()
    other = tenant.post("/email/send", json={**body, "subject": "Other"}, headers=headers)
    assert_error(other, 409, "idempotency_conflict")


# --- plan limit -----------------------------------------------------------------------

def test_a_workspace_at_its_monthly_limit_gets_limit_reached(service):
    tenant = service.tenant()
    set_monthly_limit(service, tenant, 3)
    body = {"subject": "Hi", "text": "x"}
    assert tenant.post("/email/send", json={**body, "to": address()}).status_code == 202
    batch = tenant.post("/email/batch", json={"messages": [{**body, "to": address()}] * 3})
    assert_error(batch, 403, "limit_reached")
    assert tenant.post("/email/batch", json={"messages": [{**body, "to": address()}] * 2}).status_code == 202
    refused = tenant.post("/email/send", json={**body, "to": address()})
    assert_error(refused, 403, "limit_reached")
    sandbox = service.extra_key(tenant, sandbox=True)
    assert sandbox.post("/email/send", json={**body, "to": address()}).status_code == 202


def test_a_single_send_that_sends_nothing_leaves_the_month_as_it_was(service):
    """A single send's email is charged while its message is built; a send that then
    fails (unknown template) or sends nothing (every recipient suppressed) has it given
    back before its answer, and one at the limit that sends nothing is not refused."""
    tenant = service.tenant()
    set_monthly_limit(service, tenant, 1)
    body = {"subject": "Hi", "text": "x"}
    missing = tenant.post("/email/send", json={"to": address(), "subject": "Hi", "template_id": str(uuid.uuid4())})
    assert missing.status_code == 404
    assert month_used(service, tenant) == 0
    tenant.post("/suppressions", json={"email": (blocked := address())}).raise_for_status()
    suppressed = tenant.post("/email/send", json={**body, "to": blocked})
    assert suppressed.status_code == 200 and suppressed.json()["data"]["status"] == "suppressed"
    assert month_used(service, tenant) == 0
    assert tenant.post("/email/send", json={**body, "to": address()}).status_code == 202
    assert month_used(service, tenant) == 1
    at_the_limit = tenant.post("/email/send", json={**body, "to": blocked})
    assert at_the_limit.status_code == 200 and at_the_limit.json()["data"]["status"] == "suppressed"
    assert_error(tenant.post("/email/send", json={**body, "to": address()}), 403, "limit_reached")
    assert month_used(service, tenant) == 1


def set_monthly_limit(service, tenant, limit):
    async def update(db):
        await db.workspaces.update_one({"_id": tenant.workspace_id}, {"$set": {"monthly_email_limit": limit}})
    service.store.run(update)


def test_a_cancelled_scheduled_email_gives_its_count_back_to_the_plan(service):
    tenant = service.tenant()
    set_monthly_limit(service, tenant, 1)
    later = {"subject": "Hi", "text": "x", "send_at": iso(utcnow() + dt.timedelta(hours=1))}
    message_id = tenant.post("/email/send", json={**later, "to": address()}).json()["data"]["message_id"]
    full = tenant.post("/email/send", json={**later, "to": address()})
    assert_error(full, 403, "limit_reached")
    assert tenant.delete(f"/email/{message_id}").status_code == 200
    assert tenant.delete(f"/email/{message_id}").status_code == 200  # a repeat gives nothing back twice
    assert tenant.post("/email/send", json={**later, "to": address()}).status_code == 201
    again = tenant.post("/email/send", json={**later, "to": address()})
    assert_error(again, 403, "limit_reached")


@pytest.mark.e2e
def test_when_the_broker_is_unreachable_the_send_fails_loudly_and_is_not_counted(service):
    """A front whose broker is down answers 500 `schedule_failed`: the message is stored
    as failed (never sent later behind the client's back) and the plan gets its count back."""
    from ops.embedded_store import free_port
    from tests.support.services import another_front
    tenant = service.tenant()
    set_monthly_limit(service, tenant, 2)
    env = dict(service.env, POSTROOM_AMQP_URL=f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F")
    body = {"subject": "Hi", "text": "x"}
    with another_front("front-broker-down", env, service.log_dir, answers=(503,)) as base_url:
        broken = tenant.client.post(base_url + "/api/v1/email/send", json={**body, "to": address()})
        broken_batch = tenant.client.post(base_url + "/api/v1/email/batch",
                                          json={"messages": [{**body, "to": address()}] * 2})
    for response in (broken, broken_batch):
        assert_error(response, 500, "schedule_failed")
        assert "Traceback" not in response.text

    async def statuses(db):
        return sorted(m["status"] for m in await db.messages.find({"workspace_id": tenant.workspace_id}).to_list())
    assert service.store.run(statuses) == ["failed", "failed", "failed"]
    # nothing was counted: the whole limit of 2 is still there
    assert tenant.post("/email/batch", json={"messages": [{**body, "to": address()}] * 2}).status_code == 202


# --- POST /email/batch ------------------------------------------------------------------

def test_batch_answers_202_with_an_id_and_one_message_per_item(service, tenant):
    items = [{"to": address(), "subject": f"Hi {i}", "text": "x"} for i in range(3)]
    response = tenant.post("/email/batch", json={"messages": items})
    assert response.status_code == 202, response.text
    data = response.json()["data"]
    assert data["status"] == "processing" and data["total"] == 3 and len(data["message_ids"]) == 3
    assert data["batch_id"].startswith("batch_")
    status = tenant.get(f"/email/{data['message_ids'][1]}/status").json()["data"]
    assert status["batch_id"] == data["batch_id"] and status["subject"] == "Hi 1"
    view = tenant.get(f"/email/batch/{data['batch_id']}").json()["data"]
    assert view["batch_id"] == data["batch_id"] and view["total"] == 3
    assert set(view["counts"]) == {"queued", "sent", "delivered", "bounced", "failed", "suppressed", "cancelled"}


@pytest.mark.parametrize("item, code, path", [
    ({"subject": "Hi", "text": "x"}, "validation_error", "messages[2].to"),
    ({"to": "x@example.org", "text": "x"}, "validation_error", "messages[2].subject"),
    ({"to": "broken", "subject": "Hi", "text": "x"}, "validation_error", "messages[2].to"),
    ({"to": "x@example.org", "subject": "Hi"}, "no_content", "messages[2]"),
    ({"to": "x@example.org", "subject": "Hi", "html": "x" * (256 * 1024 + 1)}, "validation_error",
     "messages[2].html"),
    ({"to": "x@example.org", "subject": "Hi", "text": "x", "send_at": "2030-01-01T00:00:00Z"},
     "validation_error", "messages[2].send_at"),
    ({"to": "x@example.org", "subject": "Hi", "text": "x", "from_name": "A\r\nB"},
     "validation_error", "messages[2].from_name"),
    ({"to": "x@example.org", "subject": "Hi", "html": "{{#if a}}" * 401 + "{{/if}}" * 401},
     "validation_error", "messages[2].html"),
    ({"to": "x@example.org", "subject": "Hi", "template_data": {"items": list(range(600))},
      "html": "{{#each items}}{{#each items}}{{#each items}}{{this}}{{/each}}{{/each}}{{/each}}"},
     "validation_error", "messages[2].template_data.items"),
])
def test_an_invalid_batch_item_is_named_and_nothing_is_stored(service, tenant, item, code, path):
    good = {"to": address(), "subject": "Hi", "text": "x"}
    before = count_messages(service, tenant.workspace_id)
    response = tenant.post("/email/batch", json={"messages": [good, good, item, good]})
    assert_error(response, 400, code, path)
    assert count_messages(service, tenant.workspace_id) == before


def test_a_batch_item_without_any_sender_answers_missing_from_email_with_its_path(service):
    tenant = service.tenant(from_email=None)
    items = [{"to": address(), "subject": "Hi", "text": "x", "from_email": "a@example.org"},
             {"to": address(), "subject": "Hi", "text": "x"}]
    response = tenant.post("/email/batch", json={"messages": items})
    assert_error(response, 400, "missing_from_email", "messages[1].from_email")


@pytest.mark.parametrize("messages", [[], None, "x"])
def test_a_batch_without_a_list_of_messages_is_refused(tenant, messages):
    response = tenant.post("/email/batch", json={"messages": messages})
    assert_error(response, 400, "validation_error", "messages")


def test_a_batch_of_more_than_1000_messages_is_refused(tenant):
    item = {"to": "x@example.org", "subject": "Hi", "text": "x"}
    response = tenant.post("/email/batch", json={"messages": [item] * 1001})
    assert_error(response, 400, "validation_error", "messages")


def test_a_batch_replayed_with_its_idempotency_key_is_not_sent_twice(service, tenant):
    body = {"messages": [{"to": address(), "subject": "Hi", "text": "x"}]}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    first = tenant.post("/email/batch", json=body, headers=headers)
    before = count_messages(service, tenant.workspace_id)
    again = tenant.post("/email/batch", json=body, headers=headers)
    assert again.headers["X-Idempotency-Status"] == "cached" and again.json() == first.json()
    assert count_messages(service, tenant.workspace_id) == before


def test_unknown_and_foreign_batches_answer_404(service, tenant):
    other = service.tenant()
    batch_id = other.post("/email/batch", json={"messages": [{"to": address(), "subject": "Hi",
                                                              "text": "x"}]}).json()["data"]["batch_id"]
    assert tenant.get(f"/email/batch/{batch_id}").status_code == 404
    assert tenant.get("/email/batch/batch_nope").status_code == 404
    assert other.get(f"/email/batch/{batch_id}").status_code == 200
