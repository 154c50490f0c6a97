"""Campaign parts against the store (mongo/campaign_parts.py): stored once, held by one
job at a time, finished once, handed to a new job when their lease lapses; and the one
insert that records each of a part's recipients as its outcome leaves it
(messages.insert_moved)."""

from __future__ import annotations

import uuid

import pytest

from mongo import campaign_parts, contacts, messages
from pipelines.campaigns import stats as campaign_stats
from pipelines.campaigns.fanout import campaign_message
from pipelines.core.clock import in_seconds, now_iso
from pipelines.messages import delivery_status
from pipelines.workflows import render_chunk

CAMPAIGN = {"_id": "cmp_parts", "workspace_id": "ws_parts", "key_id": "key_1", "sandbox": False, "subject": "Hi",
            "template_id": "tpl_1", "template_version": 1, "track_opens": True, "track_clicks": True,
            "sender": {"from_address": "news@acme.example", "from_name": "Acme", "reply_to": None,
                       "signing_domain": "acme.example", "custom_domain": True}}


def campaign() -> dict:
    return {**CAMPAIGN, "_id": f"cmp_{uuid.uuid4().hex[:8]}"}


def held(camp: dict, token: str, n: int) -> dict[str, dict]:
    """Messages made in memory for `n` contacts, held under `token` (as a part's job makes them)."""
    at = now_iso()
    docs = [{**campaign_message(camp, {"_id": f"ct_{i}", "email": f"r{i}@parts.example"}, at),
             "lease_token": token, "lease_until": in_seconds(300)} for i in range(n)]
    return {d["_id"]: d for d in docs}


def test_each_recipient_is_inserted_once_as_its_outcome_leaves_it(private_db):
    docs = held(campaign(), "tok", 3)
    delivered_id, retried_id, failed_id = list(docs)
    moves = [delivery_status.forward(delivered_id, "delivered", {"smtp_response": "250 ok"}, via=("sent",)),
             delivery_status.retry(retried_id, "tok", "451 later", current="queued",
                                   next_attempt_at=in_seconds(600)),
             delivery_status.fail(failed_id, "no such template")]
    assert private_db.run(messages.insert_moved, docs, moves) == 3
    stored = {d["_id"]: d for d in private_db.run(messages.load, list(docs))}

    delivered = stored[delivered_id]
    assert delivered["status"] == "delivered" and delivered["smtp_response"] == "250 ok"
    assert [e["status"] for e in delivered["history"]] == ["queued", "sent", "delivered"]
    assert delivered["sent_at"] and delivered["delivered_at"]
    assert delivered["due_ms"] == delivered["stall_ms"] == delivery_status.NEVER_MS

    # a retry is an ordinary stored message: queued, unclaimed, one attempt, due when it waits until
    retried = stored[retried_id]
    assert (retried["status"], retried["lease_token"], retried["attempts"]) == ("queued", "", 1)
    assert retried["due_ms"] < delivery_status.NEVER_MS and retried["history"][-1]["status"] == "deferred"

    assert stored[failed_id]["status"] == "failed" and stored[failed_id]["error"] == "no such template"


def test_a_recipient_recorded_already_is_left_as_it_is(private_db):
    docs = held(campaign(), "tok", 2)
    first, second = list(docs)
    delivered = [delivery_status.forward(first, "delivered", {"smtp_response": "250 ok"}, via=("sent",))]
    assert private_db.run(messages.insert_moved, docs, delivered) == 1
    # the same part run again (a redelivered job): only what was not recorded is inserted
    again = [delivery_status.fail(first, "would overwrite"),
             delivery_status.forward(second, "delivered", {"smtp_response": "250 ok"}, via=("sent",))]
    assert private_db.run(messages.insert_moved, docs, again) == 1
    stored = {d["_id"]: d for d in private_db.run(messages.load, list(docs))}
    assert stored[first]["status"] == "delivered" and stored[second]["status"] == "delivered"


def test_a_move_the_held_status_does_not_allow_is_refused(private_db):
    docs = held(campaign(), "tok", 1)
    (only,) = docs
    with pytest.raises(ValueError):
        private_db.run(messages.insert_moved, docs, [delivery_status.promote(only)])  # scheduled → queued
    assert private_db.run(messages.load, [only]) == []


def test_a_part_is_stored_once_finished_once_and_only_by_its_holder(private_db):
    camp = campaign()
    parts = [campaign_parts.new_part(camp, 0, n, [f"ct_{n}"], "tok-1", in_seconds(300)) for n in range(2)]
    assert private_db.run(campaign_parts.insert_new, parts) == parts
    # a fan-out run again stores (and so publishes) nothing
    again = [campaign_parts.new_part(camp, 0, n, [f"ct_{n}"], "tok-2", in_seconds(300)) for n in range(3)]
    assert [p["_id"] for p in private_db.run(campaign_parts.insert_new, again)] == [again[2]["_id"]]
    assert private_db.run(campaign_parts.load, parts[0]["_id"])["lease_token"] == "tok-1"

    assert private_db.run(campaign_parts.any_open, camp["_id"])
    assert not private_db.run(campaign_parts.finish, parts[0]["_id"], "tok-2")  # not its holder
    assert private_db.run(campaign_parts.finish, parts[0]["_id"], "tok-1")
    assert not private_db.run(campaign_parts.finish, parts[0]["_id"], "tok-1")  # once only
    for part in (parts[1], again[2]):
        private_db.run(campaign_parts.finish, part["_id"], part["lease_token"])
    assert not private_db.run(campaign_parts.any_open, camp["_id"])


def test_a_part_whose_lease_lapsed_goes_to_a_new_holder_once(private_db):
    camp = campaign()
    lapsed = campaign_parts.new_part(camp, 0, 0, ["ct_0"], "tok-old", in_seconds(-1))
    live = campaign_parts.new_part(camp, 0, 1, ["ct_1"], "tok-old", in_seconds(300))
    finished = campaign_parts.new_part(camp, 0, 2, ["ct_2"], "tok-old", in_seconds(-1))
    private_db.run(campaign_parts.insert_new, [lapsed, live, finished])
    private_db.run(campaign_parts.finish, finished["_id"], "tok-old")

    found = [p for p in private_db.run(campaign_parts.lapsed) if p["campaign_id"] == camp["_id"]]
    assert [p["_id"] for p in found] == [lapsed["_id"]]
    assert private_db.run(campaign_parts.take_over, found[0], "tok-new", in_seconds(300))
    assert not private_db.run(campaign_parts.take_over, found[0], "tok-other", in_seconds(300))
    # the old job, if it ever runs, holds nothing: it can neither extend nor finish the part
    assert not private_db.run(campaign_parts.extend, lapsed["_id"], "tok-old", in_seconds(300))
    assert not private_db.run(campaign_parts.finish, lapsed["_id"], "tok-old")
    assert private_db.run(campaign_parts.finish, lapsed["_id"], "tok-new")


def test_recipients_handed_on_but_not_recorded_yet_count_as_pending():
    handed_on = {"total_recipients": 10, "messages_created": 10}
    assert campaign_stats.stats({**handed_on, "status_counts": {"delivered": 4, "queued": 1}})["pending"] == 6
    assert campaign_stats.stats({**handed_on, "status_counts": {"delivered": 9, "bounced": 1}})["pending"] == 0
    # a late DSN moves a recorded message, never the count of them
    assert campaign_stats.stats({**handed_on, "status_counts": {"delivered": 8, "bounced": 2}})["pending"] == 0


class RecordingPublisher:
    def __init__(self):
        self.rendered: list[str] = []

    async def render(self, message_ids, *, born=""):
        self.rendered.extend(message_ids)


def test_a_part_whose_jobs_keep_dying_goes_on_as_single_messages(private_db):
    camp = {**campaign(), "status": "sending", "messages_created": 3}
    people = [contacts.new_document(camp["workspace_id"], email=f"u{i}@parts.example") for i in range(3)]
    people[2]["subscribed"] = False  # unsubscribed since the audience was resolved
    part = campaign_parts.new_part(camp, 0, 0, [c["_id"] for c in people], "tok-new", in_seconds(300))

    async def seed(db):
        await db.campaigns.insert_one(camp)
        await db.contacts.insert_many(people)
        await db.campaign_parts.insert_one(part)
    private_db.run(seed)
    publisher = RecordingPublisher()
    private_db.run(render_chunk.unpack_part, publisher, part["_id"], "tok-new")

    stored = private_db.run(messages.load, publisher.rendered)
    assert sorted(m["to"][0] for m in stored) == ["u0@parts.example", "u1@parts.example"]
    # ordinary messages: queued, unclaimed, so any render job (and the watchdog) may take them
    assert {(m["status"], m["lease_token"]) for m in stored} == {("queued", "")}
    assert private_db.run(campaign_parts.load, part["_id"])["done"]
    assert private_db.run(lambda db: db.campaigns.find_one({"_id": camp["_id"]}))["messages_created"] == 2
    # a job of the part that runs after all finds nothing to do
    private_db.run(render_chunk.unpack_part, publisher, part["_id"], "tok-new")
    assert len(publisher.rendered) == 2
