"""The retention job (pipelines/workflows/message_retention.py) on a real store, its clock
given: bodies go after POSTROOM_MESSAGE_BODY_RETENTION_DAYS, messages with their search
keys after POSTROOM_MESSAGE_RETENTION_DAYS, a bounded number a pass, and the rest stays."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest

from mongo import attachments, message_search, messages, workspaces
from mongo.indexes import prepare_store
from pipelines.core.clock import iso, ms_of, now_ms
from pipelines.core.settings import Settings
from pipelines.messages.attachments import AttachmentFile
from pipelines.workflows.message_retention import apply_retention

NOW = dt.datetime(2027, 6, 1, tzinfo=dt.UTC)


def _message(workspace_id: str, n: int, days_old: float) -> dict:
    at = iso(NOW - dt.timedelta(days=days_old))
    return {"_id": f"msg_{workspace_id[:8]}_{n:04d}", "workspace_id": workspace_id, "kind": "transactional",
            "to": ["a@example.org", "b@example.org"], "subject": "s", "html": "<p>x</p>", "text": "x",
            "template_data_json": "{}", "status": "delivered", "tags": ["t"], "metadata_pairs": [],
            "created_at": at, "updated_at": at, "history": [{"status": "queued", "at": at}]}


@pytest.fixture
def store(private_db):
    private_db.run(prepare_store)
    return private_db


def _state(store):
    async def read(db):
        docs = await db.messages.find({}, {"_id": 1, "html": 1, "text": 1, "template_data_json": 1}).to_list()
        keys = await db.message_keys.find({}, {"message_id": 1}).to_list()
        return {d["_id"]: d for d in docs}, {k["message_id"] for k in keys}
    return store.run(read)


def test_bodies_go_after_their_days_and_messages_after_theirs_and_the_rest_stays(store):
    settings = Settings(message_body_retention_days=30, message_retention_days=400)
    ws = store.run(workspaces.create, "retention")["_id"]
    ages = {"fresh": 1, "month_old": 31, "year_old": 399, "too_old": 401}
    docs = {name: _message(ws, n, days) for n, (name, days) in enumerate(ages.items())}
    store.run(messages.insert_many, [dict(d) for d in docs.values()])

    done = store.run(apply_retention, settings, at_ms=ms_of(iso(NOW)))

    kept, keyed = _state(store)
    assert done == 3  # one deleted, two bodies dropped
    assert set(kept) == {docs[n]["_id"] for n in ("fresh", "month_old", "year_old")}
    assert kept[docs["fresh"]["_id"]]["html"] == "<p>x</p>" and kept[docs["fresh"]["_id"]]["text"] == "x"
    for name in ("month_old", "year_old"):
        assert kept[docs[name]["_id"]]["html"] is None and kept[docs[name]["_id"]]["text"] is None
        assert kept[docs[name]["_id"]]["template_data_json"] is None
    assert keyed == set(kept)  # the deleted message's search keys went with it
    # a second pass has nothing left to do
    assert store.run(apply_retention, settings, at_ms=ms_of(iso(NOW))) == 0


def test_a_pass_touches_at_most_its_limit_and_the_next_goes_on(store):
    settings = Settings(message_body_retention_days=30, message_retention_days=400)
    ws = store.run(workspaces.create, "retention-many")["_id"]
    store.run(messages.insert_many, [_message(ws, n, 500) for n in range(25)])
    at = ms_of(iso(NOW))
    assert [store.run(apply_retention, settings, at_ms=at, limit=10) for _ in range(4)] == [10, 10, 5, 0]
    assert _state(store) == ({}, set())


def test_a_shorter_message_retention_takes_the_bodies_with_it(store):
    settings = Settings(message_body_retention_days=30, message_retention_days=10)
    ws = store.run(workspaces.create, "retention-short")["_id"]
    store.run(messages.insert_many, [_message(ws, 0, 11), _message(ws, 1, 9)])
    store.run(apply_retention, settings, at_ms=ms_of(iso(NOW)))
    kept, _ = _state(store)
    assert list(kept) == [f"msg_{ws[:8]}_0001"] and kept[f"msg_{ws[:8]}_0001"]["html"] == "<p>x</p>"


def test_retention_shorter_than_a_message_can_wait_to_be_sent_is_refused():
    with pytest.raises(ValueError, match="MESSAGE_BODY_RETENTION_DAYS"):
        Settings(message_body_retention_days=3)


def test_the_keys_of_a_message_are_its_other_recipients_tags_and_metadata():
    doc = {"to": ["A@x.org", "b@x.org"], "cc": "C@x.org", "tags": ["t1"], "metadata_pairs": ["k=v"]}
    assert message_search.to_key(doc) == "a@x.org"
    assert message_search.keys_of(doc) == ["to:b@x.org", "to:c@x.org", "tag:t1", "meta:k=v"]


def _file(data: bytes) -> AttachmentFile:
    return AttachmentFile("a.pdf", "application/pdf", None, data, hashlib.sha256(data).hexdigest())


def test_an_attachment_file_goes_once_its_newest_message_is_past_the_body_retention(store):
    """Files are kept by when a message last named them (`used_ms`), so a file sent again
    today outlives the bodies of last month's messages that sent it too; once gone, naming
    it again stores it again."""
    settings = Settings(message_body_retention_days=30, message_retention_days=400)
    day = 24 * 3600 * 1000
    old, new = _file(b"%PDF-old"), _file(b"%PDF-new")

    async def go(db):
        await attachments.store(db, "ws-files", [old, new])
        keys = [f"ws-files:{f.sha256}" for f in (old, new)]
        kept = await apply_retention(db, settings, at_ms=now_ms() + 29 * day)
        after_29 = set(await attachments.load(db, keys))
        # `new` is named again 10 days on: its used_ms moves, `old`'s does not
        await db.attachments.update_one({"_id": keys[1]}, {"$set": {"used_ms": now_ms() + 10 * day}})
        await apply_retention(db, settings, at_ms=now_ms() + 31 * day)
        after_31 = set(await attachments.load(db, keys))
        await attachments.store(db, "ws-files", [old])  # sent again: stored again
        return keys, kept, after_29, after_31, set(await attachments.load(db, keys))
    keys, kept, after_29, after_31, again = store.run(go)
    assert kept == 0 and after_29 == set(keys)
    assert after_31 == {keys[1]}
    assert again == set(keys)
