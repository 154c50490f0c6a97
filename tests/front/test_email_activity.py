"""GET /email and GET /email/:id in process, against a workspace of 20,000 messages stored
directly through the store (mongo.messages.insert_many, as intake leaves them): every
filter answers exactly the right messages, newest first, with offsets and with the cursor;
another workspace's messages never show; bad filters are 400 with their path."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from mongo import messages as message_store
from pipelines.core.clock import iso, ms_of
from tests.support.api import assert_error

SEEDED = 20_000  # issue #35: each filter against a store of at least 20,000 messages
START = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
# None the scheduler acts on: the store is the session's, where a live scheduler may run
# (with -n, beside e2e tests), and its watchdog would send a "queued" one of last March
STATUSES = ["delivered", "bounced", "suppressed", "opened", "failed", "sent"]


def _seed_doc(run: str, workspace_id: str, i: int) -> dict:
    # two messages per second: ties on created_ms are ordered by _id
    at = iso(START + dt.timedelta(seconds=i // 2))
    campaign = i % 5 == 0
    to = [f"User{i % 1000}@Example.org"] + ([f"second{i % 37}@example.org"] if i % 50 == 1 else [])
    tags = (["receipt"] if i % 4 == 0 else []) + (["vip"] if i % 10 == 0 else [])
    metadata = {"order": f"o{i % 100}", "plan": "pro" if i % 2 else "free"} if i % 3 == 0 else {}
    return {
        "_id": f"msg_{run}{i:026d}", "workspace_id": workspace_id, "key_id": "key_seed",
        "kind": "campaign" if campaign else "transactional",
        **({} if campaign else {"stream": "marketing" if i % 7 == 0 else "transactional"}),
        "campaign_id": f"cmp_{run}_{i % 3}" if campaign else None, "batch_id": None,
        "to": to, "subject": f"Message {i}", "html": "<p>hi</p>", "text": "hi",
        "status": "cancelled" if i % 997 == 0 else STATUSES[i % 6], "attempts": 1,
        "tags": tags, "metadata": metadata, "metadata_pairs": [f"{k}={v}" for k, v in metadata.items()],
        "created_at": at, "updated_at": at, "history": [{"status": "queued", "at": at}],
    }


@pytest.fixture(scope="module")
def seeded(service):
    """A workspace of SEEDED messages (and another with a few), as the store holds them."""
    tenant = service.tenant()
    other = service.tenant()
    run = uuid.uuid4().hex[:6]
    docs = [_seed_doc(run, tenant.workspace_id, i) for i in range(SEEDED)]
    theirs = [_seed_doc(uuid.uuid4().hex[:6], other.workspace_id, i) for i in range(50)]

    async def store(db):
        for first in range(0, len(docs), 2_000):
            await message_store.insert_many(db, [dict(d) for d in docs[first:first + 2_000]])
        await message_store.insert_many(db, [dict(d) for d in theirs])
    service.store.run(store)
    for d in docs:
        d.setdefault("stream", "marketing" if d["kind"] == "campaign" else "transactional")
    return tenant, other, docs, theirs


def newest_first(docs):
    return [d["_id"] for d in sorted(docs, key=lambda d: (ms_of(d["created_at"]), d["_id"]), reverse=True)]


def ids(response):
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["data"]]


FILTERS = {
    "to": ({"to": "user17@example.ORG"}, lambda d: "user17@example.org" in [r.lower() for r in d["to"]]),
    "to (a second recipient)": ({"to": "second5@example.org"}, lambda d: "second5@example.org" in d["to"]),
    "status": ({"status": "bounced"}, lambda d: d["status"] == "bounced"),
    "status (rare)": ({"status": "cancelled"}, lambda d: d["status"] == "cancelled"),
    "tag": ({"tag": "vip"}, lambda d: "vip" in d["tags"]),
    "metadata": ({"metadata[order]": "o42"}, lambda d: d["metadata"].get("order") == "o42"),
    "two metadata pairs": ({"metadata[order]": "o42", "metadata[plan]": "free"},
                           lambda d: d["metadata"].get("order") == "o42" and d["metadata"].get("plan") == "free"),
    "stream": ({"stream": "marketing"}, lambda d: d["stream"] == "marketing"),
    "campaign": ("campaign", None),
    "since/until": ({"since": iso(START + dt.timedelta(seconds=1000)),
                     "until": iso(START + dt.timedelta(seconds=1100))},
                    lambda d: START + dt.timedelta(seconds=1000) <= dt.datetime.fromisoformat(d["created_at"])
                    < START + dt.timedelta(seconds=1100)),
    "until a date": ({"until": "2026-03-01"}, lambda d: d["created_at"] < "2026-03-02"),
    "tag and status": ({"tag": "receipt", "status": "delivered"},
                       lambda d: "receipt" in d["tags"] and d["status"] == "delivered"),
    "to and status": ({"to": "user10@example.org", "status": "opened"},
                      lambda d: d["to"][0].lower() == "user10@example.org" and d["status"] == "opened"),
    "stream, status and window": ({"stream": "transactional", "status": "failed", "since": "2026-03-01T02:00:00Z"},
                                  lambda d: d["stream"] == "transactional" and d["status"] == "failed"
                                  and d["created_at"] >= "2026-03-01T02:00:00"),
    "nothing matches": ({"tag": "nobody-has-this"}, lambda d: False),
}


UPPER_BOUND_TOTALS = {"tag and status"}


@pytest.mark.parametrize("name", list(FILTERS))
def test_each_filter_answers_exactly_its_messages_newest_first(seeded, name):
    tenant, _, docs, _ = seeded
    params, keep = FILTERS[name]
    if params == "campaign":
        campaign = docs[0]["campaign_id"]
        params, keep = {"campaign_id": campaign}, (lambda d: d["campaign_id"] == campaign)
    want = newest_first([d for d in docs if keep(d)])
    response = tenant.get("/email", params={**params, "limit": 1000})
    assert ids(response) == want[:1000]
    pagination = response.json()["pagination"]
    assert pagination["has_more"] == (len(want) > 1000)
    if name in UPPER_BOUND_TOTALS:  # a tag's 5,000 messages narrowed by status: not all read to count
        assert pagination["total_exact"] is False and pagination["total"] >= len(want)
    else:
        assert pagination["total_exact"] is True and pagination["total"] == len(want)


def test_the_whole_workspace_pages_by_cursor_in_order_with_nothing_missed_or_repeated(seeded):
    tenant, _, docs, _ = seeded
    seen, cursor = [], None
    for _ in range(SEEDED // 1000 + 2):
        response = tenant.get("/email", params={"limit": 1000, **({"cursor": cursor} if cursor else {})})
        seen += ids(response)
        cursor = response.json()["pagination"]["next_cursor"]
        if cursor is None:
            break
    assert seen == newest_first(docs)


def test_a_cursor_walks_a_filter_too_and_offsets_match_it(seeded):
    tenant, _, docs, _ = seeded
    want = newest_first([d for d in docs if "receipt" in d["tags"]])
    first = tenant.get("/email", params={"tag": "receipt", "limit": 700})
    second = tenant.get("/email", params={"tag": "receipt", "limit": 700,
                                          "cursor": first.json()["pagination"]["next_cursor"]})
    assert ids(first) + ids(second) == want[:1400]
    assert ids(tenant.get("/email", params={"tag": "receipt", "limit": 700, "offset": 700})) == want[700:1400]


def test_a_cursor_page_is_stable_while_new_mail_arrives(seeded, service):
    tenant, _, docs, _ = seeded
    first = tenant.get("/email", params={"status": "sent", "limit": 10})
    cursor = first.json()["pagination"]["next_cursor"]
    newer = {**_seed_doc(uuid.uuid4().hex[:6], tenant.workspace_id, 6), "status": "sent",
             "created_at": iso(dt.datetime.now(dt.UTC))}
    newer["updated_at"] = newer["created_at"]
    service.store.run(message_store.insert_many, [newer])
    want = newest_first([d for d in docs if d["status"] == "sent"])
    assert ids(tenant.get("/email", params={"status": "sent", "limit": 10, "cursor": cursor})) == want[10:20]
    assert ids(tenant.get("/email", params={"status": "sent", "limit": 1}))[0] == newer["_id"]


def test_a_list_item_shows_what_the_message_is_without_its_bodies(seeded):
    tenant, _, docs, _ = seeded
    [item] = tenant.get("/email", params={"tag": "vip", "limit": 1}).json()["data"]
    doc = next(d for d in docs if d["_id"] == item["id"])
    assert item["to"] == doc["to"] and item["subject"] == doc["subject"] and item["status"] == doc["status"]
    assert item["tags"] == doc["tags"] and item["metadata"] == doc["metadata"] and item["stream"] == doc["stream"]
    assert "html" not in item and "text" not in item and "timeline" not in item


def test_another_workspaces_messages_never_show_and_their_ids_are_404(seeded):
    tenant, other, docs, theirs = seeded
    response = other.get("/email", params={"limit": 1000})
    assert set(ids(response)) == {d["_id"] for d in theirs}
    assert response.json()["pagination"]["total"] == len(theirs)
    assert ids(other.get("/email", params={"tag": "vip"})) == newest_first([d for d in theirs if "vip" in d["tags"]])
    assert_error(other.get(f"/email/{docs[0]['_id']}"), 404, "not_found")
    assert_error(tenant.get(f"/email/{theirs[0]['_id']}"), 404, "not_found")
    assert_error(tenant.get(f"/email/msg_{uuid.uuid4().hex}"), 404, "not_found")
    assert ids(tenant.get("/email", params={"campaign_id": theirs[0]["campaign_id"]})) == []


def test_one_message_answers_with_its_timeline(seeded):
    tenant, _, docs, _ = seeded
    response = tenant.get(f"/email/{docs[3]['_id']}")
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["id"] == docs[3]["_id"] and data["metadata"] == docs[3]["metadata"]
    assert data["timeline"][0] == {"type": "accepted", "at": docs[3]["created_at"], "status": "queued"}


@pytest.mark.parametrize("params, path", [
    ({"status": "lost"}, "status"),
    ({"to": "not-an-address"}, "to"),
    ({"stream": "bulk"}, "stream"),
    ({"tag": "x" * 101}, "tag"),
    ({"tag": ""}, "tag"),
    ({"metadata[]": "x"}, "metadata"),
    ({"metadata[k]": "v" * 501}, "metadata.k"),
    ({"cursor": "%%%not-a-cursor"}, "cursor"),
    ({"cursor": "bm90LWEtY3Vyc29y"}, "cursor"),
    ({"since": "yesterday"}, "since"),
    ({"until": "2026-13-01"}, "until"),
    ({"since": "2026-03-02", "until": "2026-03-01"}, "until"),
    ({"limit": "0"}, "limit"),
    ({"limit": "1001"}, "limit"),
    ({"offset": "-1"}, "offset"),
    ({"offset": "5", "cursor": "MTc3MjMyMzIwMDAwMDptc2dfeA"}, "offset"),
])
def test_a_bad_filter_is_a_validation_error_naming_it(seeded, params, path):
    tenant = seeded[0]
    assert_error(tenant.get("/email", params=params), 400, "validation_error", path)


def test_too_many_metadata_filters_are_refused(seeded):
    tenant = seeded[0]
    params = {f"metadata[k{n}]": "v" for n in range(11)}
    assert_error(tenant.get("/email", params=params), 400, "validation_error", "metadata")


def test_a_key_without_email_read_may_not_list(service, seeded):
    tenant = seeded[0]
    reader = service.extra_key(service.tenant(), permissions=["contacts:read"])
    assert_error(reader.get("/email"), 403, "forbidden")
    assert tenant.get("/email", params={"limit": 1}).status_code == 200


def test_mail_sent_with_cc_tags_and_metadata_is_found_by_each_of_them(service):
    """The two halves of issue #35 together: what POST /email/send and /email/batch store
    (cc, bcc, tags, metadata) is what GET /email finds a message by."""
    tenant = service.tenant(sandbox=True)
    mark = uuid.uuid4().hex[:8]
    sent = tenant.post("/email/send", json={
        "to": f"ann-{mark}@example.org", "cc": [f"Cc-{mark}@Example.org"], "bcc": f"bcc-{mark}@example.org",
        "subject": "Receipt", "html": "<p>Thanks</p>", "tags": ["receipt", f"t{mark}"],
        "metadata": {"order": f"o-{mark}"}})
    assert sent.status_code in (200, 201, 202), sent.text
    message_id = sent.json()["data"]["message_id"]
    batch = tenant.post("/email/batch", json={"messages": [
        {"to": f"bob-{mark}@example.org", "subject": "Other", "text": "x", "tags": [f"t{mark}"]}]})
    assert batch.status_code in (200, 201, 202), batch.text

    def found(**params) -> list[str]:
        listed = tenant.get("/email", params=params)
        assert listed.status_code == 200, listed.text
        return [m["id"] for m in listed.json()["data"]]
    assert found(to=f"cc-{mark}@example.org") == [message_id]  # a cc, in another letter case
    assert found(to=f"bcc-{mark}@example.org") == [message_id]
    assert found(**{"metadata[order]": f"o-{mark}"}) == [message_id]
    assert len(found(tag=f"t{mark}")) == 2 and message_id in found(tag=f"t{mark}")
    item = tenant.get(f"/email/{message_id}").json()["data"]
    assert item["tags"] == ["receipt", f"t{mark}"] and item["metadata"] == {"order": f"o-{mark}"}
