"""The Idempotency-Key header on POST /email/send: new, cached, conflict, concurrent, expiry."""

import json
import threading
import uuid

import pytest

from mongo.recent import FRESH_SECONDS
from tests.support.api import assert_error
from tests.support.polling import wait_until

SEND = {"to": "idem@example.org", "subject": "Once", "text": "only once", "track_opens": False}


def new_key() -> str:
    return f"idem-{uuid.uuid4().hex}"


def message_count(service, workspace_id) -> int:
    async def count(db):
        return await db.messages.count_documents({"workspace_id": workspace_id})
    return service.store.run(count)


def post_with_key(tenant, key, content: bytes):
    return tenant.client.post("/email/send", content=content,
                              headers={"Idempotency-Key": key, "Content-Type": "application/json"})


def test_first_call_executes_and_a_replay_returns_the_cached_response(service):
    tenant = service.tenant(sandbox=True)
    key = new_key()
    first = post_with_key(tenant, key, json.dumps(SEND).encode())
    assert first.status_code == 202, first.text
    assert first.headers["X-Idempotency-Status"] == "new"

    reordered = json.dumps(dict(reversed(list(SEND.items()))), indent=2).encode()
    replay = post_with_key(tenant, key, reordered)
    assert replay.status_code == 202
    assert replay.headers["X-Idempotency-Status"] == "cached"
    assert replay.json() == first.json()
    assert message_count(service, tenant.workspace_id) == 1


def test_without_the_header_every_call_executes(service):
    tenant = service.tenant(sandbox=True)
    first = tenant.post("/email/send", json=SEND)
    second = tenant.post("/email/send", json=SEND)
    assert "X-Idempotency-Status" not in first.headers
    assert first.json()["data"]["message_id"] != second.json()["data"]["message_id"]
    assert message_count(service, tenant.workspace_id) == 2


def test_same_key_with_a_different_body_answers_409_idempotency_conflict(service):
    tenant = service.tenant(sandbox=True)
    key = new_key()
    assert post_with_key(tenant, key, json.dumps(SEND).encode()).status_code == 202
    conflict = post_with_key(tenant, key, json.dumps({**SEND, "subject": "Twice"}).encode())
    assert_error(conflict, 409, "idempotency_conflict")
    assert message_count(service, tenant.workspace_id) == 1


def test_a_key_is_scoped_to_its_workspace(service):
    first, second = service.tenant(sandbox=True), service.tenant(sandbox=True)
    key = new_key()
    a = post_with_key(first, key, json.dumps(SEND).encode())
    b = post_with_key(second, key, json.dumps(SEND).encode())
    assert a.headers["X-Idempotency-Status"] == b.headers["X-Idempotency-Status"] == "new"
    assert a.json()["data"]["message_id"] != b.json()["data"]["message_id"]


def test_a_refused_request_is_cached_too(service):
    tenant = service.tenant(sandbox=True)
    key = new_key()
    bad = json.dumps({**SEND, "to": "not-an-address"}).encode()
    first = post_with_key(tenant, key, bad)
    replay = post_with_key(tenant, key, bad)
    assert first.status_code == replay.status_code == 400
    assert replay.headers["X-Idempotency-Status"] == "cached"
    assert replay.json() == first.json()
    assert replay.json()["error"]["path"] == "to"


@pytest.mark.e2e
def test_two_concurrent_requests_with_one_key_create_exactly_one_message(service):
    tenant = service.tenant(sandbox=True)
    key = new_key()
    body = json.dumps(SEND).encode()
    attempts = 8
    barrier = threading.Barrier(attempts)
    results = [None] * attempts

    def attempt(i):
        import httpx
        with httpx.Client(base_url=service.api, timeout=30,
                          headers={"Authorization": f"Bearer {tenant.key}"}) as client:
            barrier.wait()
            results[i] = client.post("/email/send", content=body,
                                     headers={"Idempotency-Key": key, "Content-Type": "application/json"})

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(attempts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    new = [r for r in results if r.headers.get("X-Idempotency-Status") == "new"]
    cached = [r for r in results if r.headers.get("X-Idempotency-Status") == "cached"]
    in_progress = [r for r in results if r.status_code == 409]
    assert len(new) == 1
    assert len(cached) + len(in_progress) == attempts - 1
    for response in in_progress:
        assert response.json()["error"]["code"] == "conflict"
    for response in cached:
        assert response.json() == new[0].json()
    assert message_count(service, tenant.workspace_id) == 1


def test_an_expired_key_executes_as_new(service):
    tenant = service.tenant(sandbox=True)
    key = new_key()
    first = post_with_key(tenant, key, json.dumps(SEND).encode())

    async def expire(db):
        result = await db.idempotency.update_one({"_id": f"{tenant.workspace_id}:{key}"},
                                                 {"$set": {"expires_at": "2000-01-01T00:00:00.000000Z"}})
        return result.matched_count
    assert service.store.run(expire) == 1

    again = post_with_key(tenant, key, json.dumps({**SEND, "subject": "a new body is fine now"}).encode())
    assert again.status_code == 202
    assert again.headers["X-Idempotency-Status"] == "new"
    assert again.json()["data"]["message_id"] != first.json()["data"]["message_id"]
    assert message_count(service, tenant.workspace_id) == 2


def test_a_fresh_key_expires_after_the_configured_hour(service):
    tenant = service.tenant(sandbox=True)
    key = new_key()
    post_with_key(tenant, key, json.dumps(SEND).encode())

    async def record(db):
        return await db.idempotency.find_one({"_id": f"{tenant.workspace_id}:{key}"})
    import datetime as dt
    doc = service.store.run(record)
    created = dt.datetime.fromisoformat(doc["created_at"].replace("Z", "+00:00"))
    expires = dt.datetime.fromisoformat(doc["expires_at"].replace("Z", "+00:00"))
    assert abs((expires - created).total_seconds() - 3600) < 5
    assert doc["state"] == "done"


def test_key_longer_than_255_characters_answers_400(service):
    tenant = service.tenant(sandbox=True)
    too_long = post_with_key(tenant, "k" * 256, json.dumps(SEND).encode())
    assert_error(too_long, 400, "validation_error", "Idempotency-Key")
    assert message_count(service, tenant.workspace_id) == 0
    longest = post_with_key(tenant, "k" * 255, json.dumps(SEND).encode())
    assert longest.status_code == 202
    assert longest.headers["X-Idempotency-Status"] == "new"


def _set_record(service, tenant, key, **fields):
    async def change(db):
        return (await db.idempotency.update_one({"_id": f"{tenant.workspace_id}:{key}"},
                                                {"$set": fields})).matched_count
    assert service.store.run(change) == 1


def test_a_request_still_in_progress_answers_409_conflict(service):
    tenant = service.tenant(sandbox=True)
    key = new_key()
    post_with_key(tenant, key, json.dumps(SEND).encode())
    from pipelines.core.clock import now_iso
    _set_record(service, tenant, key, state="in_progress", response=None, created_at=now_iso())

    busy = post_with_key(tenant, key, json.dumps(SEND).encode())
    assert_error(busy, 409, "conflict")
    assert message_count(service, tenant.workspace_id) == 1


def test_a_claim_abandoned_mid_request_is_taken_over_by_a_retry_that_finds_its_message(service):
    # A front that died after storing the message, before answering: the retry executes
    # again under the same seed, so it finds that message instead of storing a second one.
    tenant = service.tenant(sandbox=True)
    key = new_key()
    first = post_with_key(tenant, key, json.dumps(SEND).encode())
    from pipelines.core.clock import in_seconds
    _set_record(service, tenant, key, state="in_progress", response=None, created_at=in_seconds(-600))

    retry = post_with_key(tenant, key, json.dumps(SEND).encode())
    assert retry.status_code == 202
    assert retry.headers["X-Idempotency-Status"] == "new"
    assert retry.json()["data"]["message_id"] == first.json()["data"]["message_id"]
    assert message_count(service, tenant.workspace_id) == 1


def test_a_retry_after_an_unknown_outcome_gets_the_same_message_once(service):
    # A front that could not tell whether its insert landed releases the key keeping its
    # seed; here the insert had landed: the retry answers with that message, stores no other.
    tenant = service.tenant(sandbox=True)
    key = new_key()
    first = post_with_key(tenant, key, json.dumps(SEND).encode())
    _set_record(service, tenant, key, state="released", response=None)

    retry = post_with_key(tenant, key, json.dumps(SEND).encode())
    assert retry.status_code == 202
    assert retry.json()["data"]["message_id"] == first.json()["data"]["message_id"]
    assert message_count(service, tenant.workspace_id) == 1
    replay = post_with_key(tenant, key, json.dumps(SEND).encode())
    assert replay.headers["X-Idempotency-Status"] == "cached"


def test_a_released_key_with_another_body_executes_it_as_new(service):
    tenant = service.tenant(sandbox=True)
    key = new_key()
    first = post_with_key(tenant, key, json.dumps(SEND).encode())
    _set_record(service, tenant, key, state="released", response=None)

    other = post_with_key(tenant, key, json.dumps({**SEND, "subject": "Another"}).encode())
    assert other.status_code == 202
    assert other.json()["data"]["message_id"] != first.json()["data"]["message_id"]
    assert message_count(service, tenant.workspace_id) == 2


def test_after_a_5xx_the_key_is_released_so_a_retry_executes(service):
    tenant = service.tenant(sandbox=True)
    key = new_key()

    async def set_name(db, name):
        await db.workspaces.update_one({"_id": tenant.workspace_id},
                                       {"$set": {"name": name}, "$unset": {"sending_local_part": ""}})
    service.store.run(set_name, 123)  # a damaged workspace makes the send fail unexpectedly
    failed = post_with_key(tenant, key, json.dumps(SEND).encode())
    assert_error(failed, 500, "internal_error")

    service.store.run(set_name, "Repaired")
    # The front sees the repaired workspace within mongo/recent.FRESH_SECONDS; until then
    # each retry fails the same way and releases the key again.
    retry = wait_until(lambda: (lambda r: r if r.status_code != 500 else None)(
        post_with_key(tenant, key, json.dumps(SEND).encode())), timeout=FRESH_SECONDS + 3, what="a retry executing")
    assert retry.status_code == 202, retry.text
    assert retry.headers["X-Idempotency-Status"] == "new"
    assert message_count(service, tenant.workspace_id) == 1
