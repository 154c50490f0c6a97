"""Events reach a real HTTP receiver through the outbox, the scheduler, RabbitMQ and the
`webhooks` actor: signed (checked with the README's helper), retried on failure with the
same delivery id, and nothing lost while the receiver is down. Retry waits run at 1/100
of the documented schedule (POSTROOM_WEBHOOK_RETRY_SCALE=0.01 in the test service)."""

import time

import pytest

from mongo import outbox, versions
from mongo import webhooks as webhook_store
from pipelines.core.clock import in_seconds, now_iso, now_ms
from pipelines.webhooks.events import NEVER_MS, OFF_LANE, plan_deliveries
from tests.support.http_receiver import HttpReceiver, subscribe
from tests.support.polling import wait_until


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


def record(service, tenant, event, data):
    return service.store.run(outbox.record, tenant.workspace_id, event, data)


def deliveries(tenant, webhook_id):
    response = tenant.get(f"/webhooks/{webhook_id}/deliveries")
    assert response.status_code == 200, response.text
    return response.json()["data"]




def test_a_receiver_failing_twice_gets_the_event_on_the_third_attempt_with_one_delivery_id(
        service, tenant, receiver):
    hook = subscribe(tenant, receiver)
    receiver.fail_next(2, status=500)
    event_id = record(service, tenant, "contact.created", {"id": "c-1", "email": "ann@example.org"})

    [accepted] = receiver.wait_for(lambda r: r.accepted("contact.created"), what="an accepted delivery")
    requests = receiver.received("contact.created")
    assert [r.status for r in requests] == [500, 500, 200]
    assert {r.delivery_id for r in requests} == {f"{event_id}:{hook['id']}"}
    assert all(r.verified for r in requests)  # README's verify_signature accepted every attempt
    assert len({r.body for r in requests}) == 1  # the same bytes each time; only `t` differs
    assert accepted.headers["x-service-webhook-id"] == hook["id"]
    assert accepted.headers["content-type"] == "application/json"
    payload = accepted.json
    assert set(payload) == {"event", "timestamp", "data"}
    assert payload["event"] == "contact.created"
    assert payload["data"] == {"id": "c-1", "email": "ann@example.org"}

    [log] = wait_until(lambda: [d for d in deliveries(tenant, hook["id"]) if d["status"] == "delivered"],
                       what="the delivery log to say delivered")
    assert log["id"] == accepted.delivery_id and log["event_id"] == event_id
    assert log["attempt_count"] == 3 and log["delivered_at"]
    assert [a["status_code"] for a in log["attempts"]] == [500, 500, 200]
    assert [a["error"] for a in log["attempts"]] == ["HTTP 500", "HTTP 500", None]


def test_a_receiver_that_is_down_and_comes_back_loses_nothing(service, tenant, receiver):
    hook = subscribe(tenant, receiver, event="list.member_added")
    receiver.stop()
    ids = [record(service, tenant, "list.member_added", {"list_id": "l-1", "contact_id": f"c-{n}"})
           for n in range(3)]

    def failed_three_times():
        log = deliveries(tenant, hook["id"])
        return len(log) == 3 and all(d["attempt_count"] >= 3 for d in log) and log
    log = wait_until(failed_three_times, what="three failed attempts per delivery")
    assert all(d["status"] == "pending" and d["last_status_code"] == 0 and d["last_error"] for d in log)
    receiver.start()  # same port; the 4th attempt waits in the store, then the scheduler sends it

    receiver.wait_for(lambda r: len(r.accepted("list.member_added")) == 3, timeout=30,
                      what="all three events after the receiver came back")
    got = {r.json["data"]["contact_id"] for r in receiver.accepted("list.member_added")}
    assert got == {"c-0", "c-1", "c-2"}
    assert {r.delivery_id for r in receiver.accepted()} == {f"{i}:{hook['id']}" for i in ids}
    done = wait_until(lambda: all(d["status"] == "delivered" for d in deliveries(tenant, hook["id"]))
                      and deliveries(tenant, hook["id"]), what="every delivery delivered")
    assert all(d["attempt_count"] >= 4 and d["attempts"][-1]["status_code"] == 200 for d in done)
    assert all(a["status_code"] == 0 for d in done for a in d["attempts"][:-1])


def test_only_matching_events_of_the_workspace_after_subscribing_are_delivered(service, tenant, receiver):
    before = record(service, tenant, "contact.created", {"id": "before"})
    wait_until(lambda: service.store.run(_outbox_doc, before)["dispatched"], what="dispatch of the early event")
    hook = subscribe(tenant, receiver)
    other = service.tenant()
    unsubscribed = record(service, tenant, "contact.updated", {"id": "upd"})
    foreign = record(service, other, "contact.created", {"id": "foreign"})
    wanted = record(service, tenant, "contact.created", {"id": "wanted"})

    receiver.wait_for(lambda r: r.accepted(), what="the matching event")
    wait_until(lambda: all(service.store.run(_outbox_doc, e)["dispatched"] for e in (unsubscribed, foreign)),
               what="dispatch of the other events")
    assert [r.json["data"]["id"] for r in receiver.received()] == ["wanted"]
    assert [d["event_id"] for d in deliveries(tenant, hook["id"])] == [wanted]


def test_dispatching_an_event_again_makes_no_second_delivery(service, tenant, receiver):
    hook = subscribe(tenant, receiver)
    event_id = record(service, tenant, "contact.created", {"id": "once"})
    receiver.wait_for(lambda r: r.accepted(), what="the first delivery")
    wait_until(lambda: deliveries(tenant, hook["id"])[0]["status"] == "delivered", what="delivered")

    service.store.run(_undispatch, event_id)  # as if the scheduler crashed before marking it
    wait_until(lambda: service.store.run(_outbox_doc, event_id)["dispatched"], what="re-dispatch")
    [log] = deliveries(tenant, hook["id"])
    assert log["status"] == "delivered" and log["attempt_count"] == 1
    assert len(receiver.received()) == 1


def test_deleting_a_subscription_cancels_its_waiting_deliveries(service, tenant, receiver):
    hook = subscribe(tenant, receiver)
    receiver.stop()
    event_id = record(service, tenant, "contact.created", {"id": "late"})
    wait_until(lambda: [d for d in deliveries(tenant, hook["id"]) if d["attempt_count"] >= 1],
               what="a failed attempt")
    assert tenant.delete(f"/webhooks/{hook['id']}").status_code == 200
    delivery = service.store.run(_delivery_doc, f"{event_id}:{hook['id']}")
    assert delivery["status"] == "cancelled"


def test_a_delivery_lease_lets_only_one_turn_attempt_it(service, tenant):
    webhook_id = f"nobody-{time.time_ns()}"
    event = {"_id": f"lease-{time.time_ns()}", "workspace_id": tenant.workspace_id, "event": "contact.created",
             "data": {}, "timestamp": now_iso()}
    subscription = {"_id": webhook_id, "workspace_id": tenant.workspace_id, "events": ["contact.created"],
                    "active": True, "created_at": in_seconds(-60)}
    [delivery] = plan_deliveries(event, [subscription], now_iso())
    # stored without noting its lane (webhook_store.insert_deliveries would): the session's
    # scheduler would then give the lane a turn, whose worker finds no such subscription and
    # cancels the lane under the test's leases (a race seen on a loaded box)
    service.store.run(lambda db: db.webhook_deliveries.insert_one({**delivery, versions.FIELD: 0}))
    due = service.store.run(webhook_store.due_in_lane, webhook_id, 10)
    assert due == [delivery["_id"]]
    [first] = service.store.run(webhook_store.claim, webhook_id, due, "turn-a", 60)
    assert first["locked_by"] == "turn-a"
    assert service.store.run(webhook_store.claim, webhook_id, due, "turn-b", 60) == []
    assert service.store.run(webhook_store.due_in_lane, webhook_id, 10) == []  # held: not due until the lease ends
    assert service.store.run(webhook_store.finish, "turn-b", [(delivery["_id"], {"status": "delivered"})]) == 0
    assert service.store.run(webhook_store.finish, "turn-a", [(delivery["_id"], {
        "status": "delivered", "locked_by": "", "due_ms": NEVER_MS, "lane_due": OFF_LANE})]) == 1
    assert service.store.run(webhook_store.claim, webhook_id, due, "turn-b", 60) == []
    assert service.store.run(webhook_store.next_due_in_lane, webhook_id) == NEVER_MS


async def _outbox_doc(db, event_id):
    return await db.outbox.find_one({"_id": event_id})


async def _undispatch(db, event_id):
    await db.outbox.update_one({"_id": event_id}, {"$set": {"dispatched": False, outbox.DISPATCH_MS: now_ms()}})


async def _delivery_doc(db, delivery_id):
    return await db.webhook_deliveries.find_one({"_id": delivery_id})


def test_contact_and_list_changes_made_through_the_api_arrive_signed(service, tenant, receiver):
    response = tenant.post("/webhooks", json={"url": receiver.url, "events": [
        "contact.created", "contact.updated", "contact.unsubscribed", "list.member_added"]})
    assert response.status_code == 201, response.text
    hook = response.json()["data"]
    receiver.trust(hook["id"], hook["secret"])

    contact = tenant.post("/contacts", json={"email": "Webhook.Reader@Example.org", "first_name": "Wen"})
    assert contact.status_code == 201, contact.text
    contact_id = contact.json()["data"]["id"]
    assert tenant.patch(f"/contacts/{contact_id}", json={"last_name": "Hook"}).status_code == 200
    assert tenant.patch(f"/contacts/{contact_id}", json={"subscribed": False}).status_code == 200
    listed = tenant.post("/lists", json={"name": "Webhook readers"})
    assert listed.status_code == 201, listed.text
    list_id = listed.json()["data"]["id"]
    assert tenant.post(f"/lists/{list_id}/members", json={"contact_ids": [contact_id]}).status_code in (200, 201)

    wanted = {"contact.created", "contact.updated", "contact.unsubscribed", "list.member_added"}
    receiver.wait_for(lambda r: {x.headers["x-service-event"] for x in r.accepted()} >= wanted,
                      what="contact and list events")
    by_event = {r.headers["x-service-event"]: r for r in receiver.accepted()}
    assert all(r.verified and r.headers["x-service-webhook-id"] == hook["id"] for r in receiver.received())
    assert by_event["contact.created"].json["data"]["contact"]["id"] == contact_id
    assert by_event["contact.created"].json["data"]["contact"]["email"] == contact.json()["data"]["email"]
    assert by_event["list.member_added"].json["data"]["list"]["id"] == list_id
    assert by_event["list.member_added"].json["data"]["contact"]["id"] == contact_id
    assert by_event["contact.unsubscribed"].json["data"]["contact"]["id"] == contact_id
    assert by_event["contact.updated"].json["data"]["contact"]["last_name"] == "Hook"


def test_delivery_events_reach_a_subscriber_and_are_not_recorded_without_one(service, tenant, receiver):
    """email.sent / email.delivered are the per-message flood: recorded only for
    workspaces with a subscription to them, and then delivered like any event."""
    quiet = service.tenant()
    sent = quiet.post("/email/send", json={"to": "nobody-listens@example.org", "subject": "Hi", "text": "x"})
    assert sent.status_code == 202, sent.text
    service.smtp.wait_for("nobody-listens@example.org")

    subscribe(tenant, receiver, event="email.delivered")
    response = tenant.post("/email/send", json={"to": "listened@example.org", "subject": "Hi", "text": "x"})
    assert response.status_code == 202, response.text
    message_id = response.json()["data"]["message_id"]
    [delivered] = receiver.wait_for(lambda r: r.accepted("email.delivered"), what="email.delivered")
    assert delivered.json["data"]["message_id"] == message_id

    def recorded(workspace_id):
        return service.store.run(lambda db: db.outbox.find(
            {"workspace_id": workspace_id, "event": {"$in": ["email.sent", "email.delivered"]}}).to_list())
    assert [e["event"] for e in recorded(tenant.workspace_id)] == ["email.delivered"]
    assert recorded(quiet.workspace_id) == []


@pytest.mark.parametrize("url", ["http://0177.0.0.1:{port}/", "http://127.000.000.001:{port}/",
                                 "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ:{port}/", "http://ｌｏｃａｌｈｏｓｔ:{port}/"])
def test_a_stored_url_the_sender_cannot_read_fails_its_delivery_after_one_recorded_attempt(
        service, tenant, receiver, url):
    """Such URLs are refused at creation now; one stored before (here written into the
    store) used to make every attempt raise, record nothing and be re-queued forever. Now
    the attempt is recorded and the delivery ends `failed` at once: trying again cannot help."""
    hook = subscribe(tenant, receiver)

    async def store_url(db):
        await db.webhooks.update_one({"_id": hook["id"]}, {"$set": {"target_url": url.format(port=receiver.port)}})
    service.store.run(store_url)
    record(service, tenant, "contact.created", {"id": "c-unsendable"})
    [failed] = wait_until(lambda: [d for d in deliveries(tenant, hook["id"]) if d["status"] == "failed"],
                          what="the delivery to end failed")
    assert failed["attempt_count"] == 1 and failed["next_attempt_at"] is None  # failed is final
    [attempt] = failed["attempts"]
    assert attempt["status_code"] == 0 and attempt["error"].startswith("refused: the URL ")
    assert failed["last_error"] == attempt["error"]
    assert receiver.received() == []
