"""Events travel in the document whose change they describe (mongo/outbox.py): the change
and its event are one single-document write. These tests play the process that dies
between that write and the relay into the outbox, and check that the scheduler's sweep
delivers every such event exactly once, and that concurrent writers record only the
events of the changes that really happened."""

from __future__ import annotations

import asyncio

from mongo import contacts, lists, outbox
from pipelines import views
from pipelines.core.clock import in_seconds

WORKSPACE = "ws-relay"


def aged(event: dict, seconds: int) -> dict:
    return {**event, "timestamp": in_seconds(-seconds)}


async def outbox_events(db, event=None) -> list[dict]:
    query = {"workspace_id": WORKSPACE, **({"event": event} if event else {})}
    return await db.outbox.find(query, sort=[("timestamp", 1)]).to_list()


async def carried(db, contact_id) -> dict:
    return await db.contacts.find_one({"_id": contact_id}, {name: 1 for name in outbox.CARRIER_FIELDS})


def new_contact(email="ann@example.org"):
    return contacts.new_document(WORKSPACE, email=email)


def test_a_change_whose_writer_died_before_the_relay_is_relayed_once_by_the_sweep(private_db):
    async def go(db):
        doc = new_contact()
        created = aged(outbox.event_document(WORKSPACE, "contact.created", {"contact": views.contact(doc)}), 60)
        await db.contacts.insert_one(outbox.inserted_with(doc, [created]))  # ... and the front died here
        before = await outbox_events(db)
        first, second = await outbox.relay_stranded(db), await outbox.relay_stranded(db)
        return created, before, first, second, await outbox_events(db), await carried(db, doc["_id"])
    created, before, first, second, after, left = private_db.run(go)
    assert before == [] and (first, second) == (1, 0)
    assert [(e["_id"], e["event"], e["data"]) for e in after] == [(created["_id"], "contact.created", created["data"])]
    assert left[outbox.PENDING] == [] and left[outbox.PENDING_AT] == 0 and left[outbox.PENDING_TOKEN] == ""


def test_the_sweep_leaves_a_fresh_change_to_its_own_writer(private_db):
    async def go(db):
        doc = new_contact()
        created = outbox.event_document(WORKSPACE, "contact.created", {"contact": views.contact(doc)})
        await db.contacts.insert_one(outbox.inserted_with(doc, [created]))
        swept = await outbox.relay_stranded(db)
        relayed = await outbox.relay(db, "contacts", [doc["_id"]], {created["_id"]})
        return swept, [e["_id"] for e in relayed], [e["_id"] for e in await outbox_events(db)], created["_id"]
    swept, relayed, recorded, created_id = private_db.run(go)
    assert swept == 0 and relayed == recorded == [created_id]


def test_interleaved_writers_each_relay_their_own_and_the_sweep_finishes_a_dead_ones(private_db):
    async def go(db):
        doc = new_contact()
        await db.contacts.insert_one(outbox.inserted_with(doc, []))
        first = outbox.event_document(WORKSPACE, "contact.updated", {"n": 1})
        second = aged(outbox.event_document(WORKSPACE, "contact.updated", {"n": 2}), 60)
        for event in (first, second):
            await db.contacts.update_one({"_id": doc["_id"]}, outbox.carrying({"$set": {"x": event["data"]["n"]}},
                                                                              [event]))
        mine = await outbox.relay(db, "contacts", [doc["_id"]], {first["_id"]})  # the second writer died
        middle = await carried(db, doc["_id"])
        swept = await outbox.relay_stranded(db)
        return mine, middle, swept, await outbox_events(db), await carried(db, doc["_id"]), first, second
    mine, middle, swept, recorded, left, first, second = private_db.run(go)
    assert [e["_id"] for e in mine] == [first["_id"]]
    # the dead writer's event stays in the document, marked with its token, for the sweep
    assert [e["_id"] for e in middle[outbox.PENDING]] == [second["_id"]]
    assert middle[outbox.PENDING_TOKEN] == second["_id"]
    assert swept == 1 and sorted(e["_id"] for e in recorded) == sorted([first["_id"], second["_id"]])
    assert left[outbox.PENDING] == [] and left[outbox.PENDING_TOKEN] == ""


def test_two_concurrent_adds_of_a_contact_to_a_list_record_one_event_and_report_one_change(private_db):
    async def go(db):
        doc = new_contact()
        await db.contacts.insert_one(outbox.inserted_with(doc, []))
        members = {"_id": "list-1", "workspace_id": WORKSPACE, "name": "News"}
        outcomes = await asyncio.gather(*(lists.add_members(db, members, [doc["_id"]]) for _ in range(4)))
        return outcomes, await outbox_events(db, "list.member_added"), await db.contacts.find_one({"_id": doc["_id"]})
    outcomes, recorded, contact = private_db.run(go)
    assert contact["lists"] == ["list-1"]
    assert sum(len(o.changed) for o in outcomes) == 1
    assert len(recorded) == 1 and recorded[0]["data"]["list"] == {"id": "list-1", "name": "News"}
    assert contact[outbox.PENDING] == [] and contact[outbox.PENDING_TOKEN] == ""


def test_a_contact_update_and_its_events_are_one_write(private_db):
    async def go(db):
        doc = new_contact()
        assert await contacts.insert(db, doc)
        after = await contacts.update(db, WORKSPACE, doc["_id"], fields={"first_name": "Ann", "subscribed": False},
                                      set_attributes={}, unset_attributes=[])
        return after, [(e["event"], e["data"]) for e in await outbox_events(db)], await carried(db, doc["_id"])
    after, recorded, left = private_db.run(go)
    assert after["first_name"] == "Ann" and after["subscribed"] is False
    by_name = dict(recorded)
    assert sorted(by_name) == ["contact.created", "contact.unsubscribed", "contact.updated"] == sorted(
        name for name, _ in recorded)
    assert by_name["contact.updated"]["changed"] == ["first_name", "subscribed"]
    assert by_name["contact.unsubscribed"]["reason"] == "api"
    assert by_name["contact.unsubscribed"]["contact"]["subscribed"] is False
    assert left[outbox.PENDING] == []


def test_deleting_a_contact_relays_the_events_it_still_carries(private_db):
    async def go(db):
        doc = new_contact("gone@example.org")
        created = outbox.event_document(WORKSPACE, "contact.created", {"contact": views.contact(doc)})
        await db.contacts.insert_one(outbox.inserted_with(doc, [created]))  # the writer died here
        assert await contacts.delete(db, WORKSPACE, doc["_id"])
        return created["_id"], [e["_id"] for e in await outbox_events(db)], await db.contacts.count_documents({})
    created_id, recorded, left = private_db.run(go)
    assert recorded == [created_id] and left == 0
