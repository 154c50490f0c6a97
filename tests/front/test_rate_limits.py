"""Per-key rate limits: a sliding window kept in the store, so every front process
shares it; headers on every authenticated response; 429 with Retry-After."""

import datetime as dt
import uuid

import pytest

from mongo import rate_windows
from tests.support import services
from tests.support.api import assert_error, month_used

SEND = {"to": "limited@example.org", "subject": "Hi", "text": "hello"}


def reset_time(response) -> dt.datetime:
    return dt.datetime.fromisoformat(response.headers["X-RateLimit-Reset"].replace("Z", "+00:00"))


def assert_rate_headers(response, limit):
    assert response.headers["X-RateLimit-Limit"] == str(limit)
    assert 0 <= int(response.headers["X-RateLimit-Remaining"]) <= limit
    now = dt.datetime.now(dt.UTC)
    assert now - dt.timedelta(seconds=5) <= reset_time(response) <= now + dt.timedelta(seconds=61)


def test_every_authenticated_response_carries_the_rate_headers(service, tenant):
    key = service.extra_key(tenant, rate_limit=50)
    responses = [
        key.get("/api-key/permissions"),                 # 200
        key.post("/email/send", json=SEND),               # 202
        key.post("/email/send", json={"to": 1}),          # 400
        key.get("/email/no-such-message/status"),         # 404
        key.get("/no-such-route"),                        # 404 unknown route
        key.put("/email/send", json={}),                  # 405
    ]
    assert [r.status_code for r in responses] == [200, 202, 400, 404, 404, 405]
    for response in responses:
        assert_rate_headers(response, 50)
    remaining = [int(r.headers["X-RateLimit-Remaining"]) for r in responses]
    assert remaining == [49, 48, 47, 46, 45, 44]


def test_forbidden_response_carries_the_rate_headers(service, tenant):
    reader = service.extra_key(tenant, permissions=["contacts:read"], rate_limit=10)
    response = reader.post("/email/send", json=SEND)
    assert response.status_code == 403
    assert_rate_headers(response, 10)


def test_default_limit_is_100_per_minute(service):
    default = service.tenant(rate_limit=None, email_rate_limit=None)
    response = default.get("/api-key/permissions")
    assert response.headers["X-RateLimit-Limit"] == "100"
    assert response.json()["data"]["rate_limit"] == 100
    assert response.json()["data"]["email_rate_limit"] == 100


def test_over_the_limit_answers_429_rate_limited_with_retry_after(service, tenant):
    key = service.extra_key(tenant, rate_limit=5)
    allowed = [key.get("/api-key/permissions") for _ in range(5)]
    assert [r.status_code for r in allowed] == [200] * 5
    assert allowed[-1].headers["X-RateLimit-Remaining"] == "0"

    refused = key.get("/api-key/permissions")
    error = assert_error(refused, 429, "rate_limited")
    assert "5" in error["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert_rate_headers(refused, 5)
    assert refused.headers["X-RateLimit-Remaining"] == "0"

    # a refused request is not counted, and the window is per key
    assert key.get("/api-key/permissions").status_code == 429
    assert tenant.get("/api-key/permissions").status_code == 200


@pytest.mark.e2e
def test_the_limit_is_shared_by_every_front_process(service, tenant, run_dir):
    import httpx
    key = service.extra_key(tenant, rate_limit=5)
    with services.another_front("front-second", dict(service.env), service.log_dir) as other_base, \
            httpx.Client(base_url=other_base + "/api/v1", timeout=30,
                         headers={"Authorization": f"Bearer {key.key}"}) as other:
        fronts = [key.client, other]
        statuses = [fronts[i % 2].get("/api-key/permissions").status_code for i in range(6)]
        sixth_on_first = key.get("/api-key/permissions")
    assert statuses == [200, 200, 200, 200, 200, 429]
    assert sixth_on_first.status_code == 429


def test_email_window_is_separate_and_answers_429_rate_limit_exceeded(service, tenant):
    key = service.extra_key(tenant, sandbox=True, rate_limit=50, email_rate_limit=2)
    first = key.post("/email/send", json=SEND)
    second = key.post("/email/send", json=SEND)
    assert [first.status_code, second.status_code] == [202, 202]
    assert first.headers["X-EmailRateLimit-Limit"] == "2"
    assert [first.headers["X-EmailRateLimit-Remaining"], second.headers["X-EmailRateLimit-Remaining"]] == ["1", "0"]

    third = key.post("/email/send", json=SEND)
    assert_error(third, 429, "rate_limit_exceeded")
    assert 1 <= int(third.headers["Retry-After"]) <= 60

    # reads are not email sends: only the general window counts them
    status = key.get(f"/email/{first.json()['data']['message_id']}/status")
    assert status.status_code == 200
    assert "X-EmailRateLimit-Limit" not in status.headers
    assert int(status.headers["X-RateLimit-Remaining"]) == 50 - 4


def workspace_messages(service, tenant) -> int:
    async def count(db):
        return await db.messages.count_documents({"workspace_id": tenant.workspace_id})
    return service.store.run(count)


def batch(n: int) -> dict:
    return {"messages": [{**SEND, "to": f"batch-{i}@example.org"} for i in range(n)]}


def test_the_email_window_counts_emails_and_refuses_a_batch_that_does_not_fit_whole(service):
    tenant = service.tenant(sandbox=True, email_rate_limit=5)
    first = tenant.post("/email/batch", json=batch(3))
    assert first.status_code == 202, first.text
    assert first.headers["X-EmailRateLimit-Remaining"] == "2"

    refused = tenant.post("/email/batch", json=batch(3))
    assert_error(refused, 429, "rate_limit_exceeded")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.headers["X-EmailRateLimit-Remaining"] == "2"
    assert workspace_messages(service, tenant) == 3, "nothing of the refused batch was accepted"

    # what was refused used nothing: two more still fit, then the window is full
    assert tenant.post("/email/batch", json=batch(2)).headers["X-EmailRateLimit-Remaining"] == "0"
    assert tenant.post("/email/send", json=SEND).status_code == 429
    assert workspace_messages(service, tenant) == 5


def test_a_batch_larger_than_the_whole_window_is_refused_as_invalid(service):
    tenant = service.tenant(sandbox=True, email_rate_limit=5)
    response = tenant.post("/email/batch", json=batch(6))
    assert response.status_code == 400
    assert response.json()["error"]["path"] == "messages"
    assert "at most 5" in response.json()["error"]["message"]
    assert tenant.post("/email/batch", json=batch(5)).status_code == 202


def test_an_invalid_send_costs_no_email_units(service):
    tenant = service.tenant(sandbox=True, email_rate_limit=2)
    for _ in range(3):
        assert tenant.post("/email/send", json={**SEND, "to": "not-an-address"}).status_code == 400
        assert tenant.post("/email/send", json={**SEND, "template_id": "nope"}).status_code == 404
    accepted = tenant.post("/email/send", json=SEND)
    assert accepted.status_code == 202 and accepted.headers["X-EmailRateLimit-Remaining"] == "1"


def test_a_refused_plan_limit_gives_the_email_units_back(service):
    tenant = service.tenant(email_rate_limit=3)

    async def limit(db):
        await db.workspaces.update_one({"_id": tenant.workspace_id}, {"$set": {"monthly_email_limit": 1}})
    service.store.run(limit)
    assert tenant.post("/email/batch", json=batch(2)).json()["error"]["code"] == "limit_reached"
    accepted = tenant.post("/email/send", json=SEND)
    assert accepted.status_code == 202 and accepted.headers["X-EmailRateLimit-Remaining"] == "2"


def test_a_single_send_that_never_comes_to_sending_gives_its_email_back(service):
    """A single send's email is counted with its request, before its body is read: one that
    is refused (invalid, forbidden) or answered from an earlier attempt (Idempotency-Key)
    gives it back, and its answer carries no email-window headers."""
    tenant = service.tenant(sandbox=True, email_rate_limit=3)
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    first = tenant.post("/email/send", json=SEND, headers=headers)
    assert first.status_code == 202 and first.headers["X-EmailRateLimit-Remaining"] == "2"
    for _ in range(3):
        replay = tenant.post("/email/send", json=SEND, headers=headers)
        assert replay.status_code == 202
        assert replay.json()["data"]["message_id"] == first.json()["data"]["message_id"]
        invalid = tenant.post("/email/send", json={**SEND, "subject": ""})
        assert invalid.status_code == 400 and "X-EmailRateLimit-Remaining" not in invalid.headers
    reader = service.extra_key(tenant, permissions=["contacts:read"], email_rate_limit=1)
    assert reader.post("/email/send", json=SEND).status_code == 403
    assert service.store.run(rate_windows.peek, "email", reader.key_id, limit=1).used == 0
    assert [tenant.post("/email/send", json=SEND).headers["X-EmailRateLimit-Remaining"] for _ in range(2)] == ["1", "0"]
    assert_error(tenant.post("/email/send", json=SEND), 429, "rate_limit_exceeded")


def test_a_single_send_over_its_windows_is_refused_first_whatever_else_is_wrong(service):
    """The windows are counted before anything else is looked at: 429 over an invalid
    body, a missing template or a missing permission, and a valid send that does not fit
    stores nothing and charges the plan nothing."""
    tenant = service.tenant(email_rate_limit=1)
    assert tenant.post("/email/send", json=SEND).status_code == 202
    stored = workspace_messages(service, tenant)
    for body in ({**SEND, "to": "not-an-address"}, {**SEND, "template_id": str(uuid.uuid4())}, SEND):
        refused = tenant.post("/email/send", json=body)
        assert_error(refused, 429, "rate_limit_exceeded")
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert refused.headers["X-EmailRateLimit-Remaining"] == "0"
    assert workspace_messages(service, tenant) == stored
    assert month_used(service, tenant) == 1

    reader = service.extra_key(tenant, permissions=["contacts:read"], rate_limit=1)
    assert reader.get("/contacts").status_code == 200
    assert_error(reader.post("/email/send", json=SEND), 429, "rate_limited")
