"""Automation runs through the real stack (front, RabbitMQ, the `automations` actor, the
scheduler, the render/send pipeline, a real SMTP receiver and a real HTTP receiver): every
step type's effect seen through the API, the outbox and the receivers. Long waits are
tests/e2e/test_automation_clock.py."""

import re
import uuid

import httpx
import pytest

from mongo import outbox
from pipelines.core.clock import now_ms
from tests.support.api import assert_error
from tests.support.audience import events, make_contact, make_list
from tests.support.automations import make_automation, outcomes, run_of, runs, trigger, wait_run
from tests.support.campaigns import make_template
from tests.support.http_receiver import HttpReceiver
from tests.support.polling import wait_until

TEMPLATE = ('<html><body><p>Hi {{first_name|there}}, order {{order_id}}</p>'
            '<p><a href="https://shop.example/next">Next</a></p></body></html>')


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


def address(name):
    return f"{name}-{uuid.uuid4().hex[:8]}@flow.example"


def contact_view(tenant, contact_id):
    return tenant.get(f"/contacts/{contact_id}").json()["data"]


def test_a_flow_tags_branches_changes_lists_and_attributes_emails_and_calls_a_webhook(service, tenant, receiver):
    template = make_template(tenant, TEMPLATE)
    old_list, new_list = make_list(tenant, "Prospects"), make_list(tenant, "Customers")
    pro = make_contact(tenant, address("pro"), first_name="Pia", attributes={"plan": "pro"}, list_id=old_list["id"])
    free = make_contact(tenant, address("free"), first_name="Finn", attributes={"plan": "free"},
                        list_id=old_list["id"])
    flow = make_automation(tenant, [
        {"id": "tag", "step_type": "tag", "config": {"tagName": "engaged"}},
        {"id": "plan", "step_type": "condition",
         "config": {"field": "plan", "operator": "equals", "value": "pro", "trueBranchStepId": "join"}},
        {"id": "not-vip", "step_type": "tag", "config": {"tagName": "not-vip"}},
        {"id": "join", "step_type": "add_to_list", "config": {"listId": new_list["id"]}},
        {"id": "leave", "step_type": "remove_from_list", "config": {"listId": old_list["id"]}},
        {"id": "stage", "step_type": "update_attribute",
         "config": {"attributeName": "stage", "attributeValue": "onboarded"}},
        {"id": "mail", "step_type": "email",
         "config": {"templateId": template["id"], "subject": "Welcome {{first_name}}",
                    "previewText": "Your order {{order_id}} is in"}},
        {"id": "hook", "step_type": "webhook", "config": {
            "url": receiver.url, "headers": {"X-Shop": "acme"},
            "body": {"email": "{{email}}", "order": "{{order_id}}", "plan": "{{attributes.plan}}"}}},
    ])
    pro_run = trigger(tenant, flow["id"], pro, order_id="A-1")
    assert pro_run["status"] == "active" and pro_run["contact"] == {"id": pro["id"], "email": pro["email"]}
    assert pro_run["trigger"] == {"type": "api", "data": {"order_id": "A-1"}}
    free_run = trigger(tenant, flow["id"], free, order_id="B-2")

    done = wait_run(tenant, flow["id"], pro_run["id"])
    assert outcomes(done) == [("tag", "tagged"), ("plan", "true"), ("join", "added"), ("leave", "removed"),
                              ("stage", "updated"), ("mail", "sent"), ("hook", "delivered")]
    assert done["current_step"] is None and done["error"] is None and done["ended_at"]
    hook_entry = done["history"][-1]
    assert hook_entry["status_code"] == 200 and hook_entry["duration_ms"] >= 0 and hook_entry["attempt"] == 1
    free_done = wait_run(tenant, flow["id"], free_run["id"])
    assert ("not-vip", "tagged") in outcomes(free_done) and ("plan", "false") in outcomes(free_done)

    person = contact_view(tenant, pro["id"])
    assert [t["name"] for t in person["tags"]] == ["engaged"]
    assert [entry["id"] for entry in person["lists"]] == [new_list["id"]]
    assert person["attributes"] == {"plan": "pro", "stage": "onboarded"}

    [mail] = service.smtp.wait_for(pro["email"])
    assert mail.message["Subject"] == "Welcome Pia"
    assert "order A-1" in mail.body() and "Your order A-1 is in" in mail.body()
    assert mail.message["List-Unsubscribe"]  # marketing mail: one-click unsubscribe
    assert "/t/o/" in mail.body()  # opens tracked: what email_opened waits need

    calls = receiver.wait_for(lambda r: len(r.received()) == 2 and r.received(), what="two webhook calls")
    pro_call = next(c for c in calls if c.json["email"] == pro["email"])
    assert pro_call.method == "POST" and pro_call.json == {"email": pro["email"], "order": "A-1", "plan": "pro"}
    assert pro_call.headers["x-shop"] == "acme" and pro_call.headers["content-type"] == "application/json"
    assert pro_call.headers["x-postroom-delivery-id"].startswith(pro_run["id"] + ":hook:")

    mine = [e for e in events(service, tenant) if pro["id"] in str(e["data"])]
    names = [e["event"] for e in mine if e["timestamp"] >= done["started_at"]]  # not its creation's
    for expected in ("flow.triggered", "contact.tag_added", "list.member_added", "list.member_removed",
                     "contact.updated", "flow.completed"):
        assert names.count(expected) == 1, (expected, names)
    assert [e["data"]["list"]["id"] for e in mine if e["event"] == "list.member_added"] == [old_list["id"],
                                                                                          new_list["id"]]
    completed = next(e for e in mine if e["event"] == "flow.completed")["data"]
    assert completed["run_id"] == pro_run["id"] and completed["automation"] == {"id": flow["id"], "name": "Flow"}
    assert completed["contact"] == {"id": pro["id"], "email": pro["email"]} and completed["completed_at"]
    updated = next(e for e in mine if e["event"] == "contact.updated")["data"]
    assert updated["changed"] == ["attributes"]

    detail = tenant.get(f"/automations/{flow['id']}").json()["data"]
    assert detail["stats"]["completed"] == 2 and detail["stats"]["total"] == 2
    stats = {s["id"]: s["stats"] for s in detail["steps"]}
    assert stats["tag"] == {"at": 0, "passed": 2, "failed": 0}
    assert stats["not-vip"]["passed"] == 1 and stats["hook"]["passed"] == 2


def test_an_unsubscribed_contact_skips_the_email_step_and_the_run_goes_on(service, tenant):
    template = make_template(tenant)
    quiet = make_contact(tenant, address("quiet"), subscribed=False)
    flow = make_automation(tenant, [
        {"id": "mail", "step_type": "email", "config": {"templateId": template["id"], "subject": "Hi"}},
        {"id": "after", "step_type": "tag", "config": {"tagName": "after-mail"}}])
    run = wait_run(tenant, flow["id"], trigger(tenant, flow["id"], quiet)["id"])
    assert outcomes(run) == [("mail", "skipped"), ("after", "tagged")]
    assert run["history"][0]["detail"] == "the contact is unsubscribed"
    probe = make_contact(tenant, address("probe"))  # a later mail through the same pipeline: a barrier
    flow2 = make_automation(tenant, [{"step_type": "email", "config": {"templateId": template["id"],
                                                                       "subject": "Probe"}}])
    trigger(tenant, flow2["id"], probe)
    service.smtp.wait_for(probe["email"])
    assert service.smtp.messages_to(quiet["email"]) == []


def test_a_failing_webhook_is_retried_then_the_run_fails_with_the_reason(service, tenant, receiver):
    receiver.fail_next(10, status=503)
    contact = make_contact(tenant, address("hook"))
    flow = make_automation(tenant, [{"id": "hook", "step_type": "webhook",
                                     "config": {"url": receiver.url, "method": "PUT", "body": "plain {{email}}"}},
                                    {"id": "never", "step_type": "tag", "config": {"tagName": "unreached"}}])
    run = wait_run(tenant, flow["id"], trigger(tenant, flow["id"], contact)["id"], status="failed", timeout=60)
    attempts = [e for e in run["history"] if e["step_id"] == "hook"]
    assert [(e["outcome"], e["attempt"], e["status_code"]) for e in attempts] == [
        ("attempt_failed", n, 503) for n in (1, 2, 3, 4)]
    assert run["error"] == "webhook failed after 4 attempts: HTTP 503"
    assert run["current_step"]["id"] == "hook"
    calls = receiver.received()
    assert len(calls) == 4 and {c.method for c in calls} == {"PUT"}
    assert len({c.headers["x-postroom-delivery-id"] for c in calls}) == 1  # one delivery id for every attempt
    assert calls[0].body == f"plain {contact['email']}".encode()
    assert calls[0].headers["content-type"].startswith("text/plain")
    detail = tenant.get(f"/automations/{flow['id']}").json()["data"]
    assert detail["stats"]["failed"] == 1
    assert {s["id"]: s["stats"]["failed"] for s in detail["steps"]} == {"hook": 1, "never": 0}


def test_move_to_flow_starts_the_target_and_ends_or_keeps_the_current_run(service, tenant):
    target = make_automation(tenant, [{"id": "in-b", "step_type": "tag", "config": {"tagName": "in-b"}}],
                             name="B", trigger_config={"reentry": "always"})
    leave = make_automation(tenant, [
        {"id": "go", "step_type": "move_to_flow", "config": {"targetFlowId": target["id"]}},
        {"id": "after", "step_type": "tag", "config": {"tagName": "after-a"}}], name="A")
    stay = make_automation(tenant, [{"id": "go", "step_type": "move_to_flow",
                                     "config": {"targetFlowId": target["id"], "exitCurrentFlow": False}},
                                    {"id": "after", "step_type": "tag", "config": {"tagName": "after-c"}}], name="C")
    contact = make_contact(tenant, address("mover"))
    left = wait_run(tenant, leave["id"], trigger(tenant, leave["id"], contact)["id"])
    assert outcomes(left) == [("go", "moved")]
    stayed = wait_run(tenant, stay["id"], trigger(tenant, stay["id"], contact)["id"])
    assert outcomes(stayed) == [("go", "moved"), ("after", "tagged")]
    moved_runs = wait_until(lambda: [r for r in runs(tenant, target["id"]) if r["status"] == "completed"] or None
                            if len(runs(tenant, target["id"], "completed")) == 2 else None,
                            what="two runs of B completed")
    assert {r["trigger"]["data"]["from_run_id"] for r in moved_runs} == {left["id"], stayed["id"]}
    assert all(r["trigger"]["type"] == "move_to_flow" and r["contact"]["id"] == contact["id"] for r in moved_runs)
    assert left["history"][0]["target_run_id"] in {r["id"] for r in moved_runs}

    paused_target = make_automation(tenant, [{"step_type": "delay"}], name="D")
    tenant.patch(f"/automations/{paused_target['id']}", json={"status": "paused"})
    into_paused = make_automation(tenant, [{"id": "go", "step_type": "move_to_flow",
                                            "config": {"targetFlowId": paused_target["id"]}}], name="E")
    failed = wait_run(tenant, into_paused["id"], trigger(tenant, into_paused["id"], contact)["id"], status="failed")
    assert failed["error"] == f"the target automation {paused_target['id']} is paused, not active"


def test_wait_for_event_ends_when_the_contacts_event_arrives(service, tenant):
    flows = {kind: make_automation(tenant, [
        {"id": "wait", "step_type": "wait_for_event", "config": {"eventType": kind, "timeoutDays": 7}},
        {"id": "then", "step_type": "tag", "config": {"tagName": f"after-{kind}"}}], name=kind)
        for kind in ("purchase", "page_viewed")}
    buyer, viewer, bystander = (make_contact(tenant, address(n)) for n in ("buyer", "viewer", "bystander"))
    bought = trigger(tenant, flows["purchase"]["id"], buyer)
    viewed = trigger(tenant, flows["page_viewed"]["id"], viewer)
    untouched = trigger(tenant, flows["purchase"]["id"], bystander)
    for flow, run in ((flows["purchase"], bought), (flows["page_viewed"], viewed), (flows["purchase"], untouched)):
        waiting = wait_run(tenant, flow["id"], run["id"], status="active", where=lambda r: r["waiting_for"])
        assert waiting["current_step"] == {"id": "wait", "position": 0, "step_type": "wait_for_event"}
        assert waiting["next_wake_at"] > waiting["started_at"]

    assert tenant.post("/conversions", json={"contact_id": buyer["id"], "value": "9.99"}).status_code == 201
    assert tenant.post("/track/product-view", json={"contact_email": viewer["email"], "product_id": "sku-1"}
                       ).status_code == 201
    done = wait_run(tenant, flows["purchase"]["id"], bought["id"])
    assert outcomes(done) == [("wait", "waiting"), ("wait", "event_received"), ("then", "tagged")]
    assert outcomes(wait_run(tenant, flows["page_viewed"]["id"], viewed["id"]))[-1] == ("then", "tagged")
    assert run_of(tenant, flows["purchase"]["id"], untouched["id"])["status"] == "active"  # not their purchase


def test_wait_for_email_opened_ends_when_the_flows_email_is_opened(service, tenant):
    template = make_template(tenant)
    contact = make_contact(tenant, address("opener"))
    flow = make_automation(tenant, [
        {"id": "mail", "step_type": "email", "config": {"templateId": template["id"], "subject": "Open me"}},
        {"id": "wait", "step_type": "wait_for_event", "config": {"eventType": "email_opened", "timeoutDays": 3}},
        {"id": "then", "step_type": "tag", "config": {"tagName": "opened"}}])
    run = trigger(tenant, flow["id"], contact)
    [mail] = service.smtp.wait_for(contact["email"])
    wait_run(tenant, flow["id"], run["id"], status="active", where=lambda r: r["waiting_for"] == "email_opened")
    pixel = re.search(r'<img src="([^"]+/t/o/[^"]+\.gif)"', mail.body()).group(1)
    assert httpx.get(pixel).status_code == 200
    assert outcomes(wait_run(tenant, flow["id"], run["id"]))[-2:] == [("wait", "event_received"), ("then", "tagged")]


def test_cancel_a_waiting_run_and_only_an_open_run(service, tenant):
    contact = make_contact(tenant, address("cancel"))
    flow = make_automation(tenant, [{"id": "wait", "step_type": "delay", "config": {"duration": 2}}])
    run = trigger(tenant, flow["id"], contact)
    wait_run(tenant, flow["id"], run["id"], status="active", where=lambda r: r["next_wake_at"])
    cancelled = tenant.post(f"/automations/{flow['id']}/runs/{run['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["data"]["status"] == "cancelled"
    assert cancelled.json()["data"]["next_wake_at"] is None
    assert_error(tenant.post(f"/automations/{flow['id']}/runs/{run['id']}/cancel"), 409, "conflict")
    assert [r["id"] for r in runs(tenant, flow["id"], "cancelled")] == [run["id"]]
    assert runs(tenant, flow["id"], "active") == []


def test_pausing_pauses_the_runs_and_resuming_lets_them_go_on(service, tenant):
    flow = make_automation(tenant, [
        {"id": "wait", "step_type": "wait_for_event", "config": {"eventType": "purchase"}},
        {"id": "then", "step_type": "tag", "config": {"tagName": "resumed"}}])
    contact = make_contact(tenant, address("pause"))
    run = trigger(tenant, flow["id"], contact)
    wait_run(tenant, flow["id"], run["id"], status="active", where=lambda r: r["waiting_for"])
    assert tenant.patch(f"/automations/{flow['id']}", json={"status": "paused"}).status_code == 200
    assert [r["id"] for r in runs(tenant, flow["id"], "paused")] == [run["id"]]
    assert_error(tenant.post(f"/automations/{flow['id']}/trigger", json={"contact_id": contact["id"]}), 409, "conflict")
    # the event arrives while paused: it ends the wait, and the run goes on once resumed
    assert tenant.post("/conversions", json={"contact_id": contact["id"], "value": 5}).status_code == 201
    wait_run(tenant, flow["id"], run["id"], status="paused",
             where=lambda r: ("wait", "event_received") in outcomes(r))
    assert tenant.patch(f"/automations/{flow['id']}", json={"status": "active"}).status_code == 200
    assert outcomes(wait_run(tenant, flow["id"], run["id"]))[-1] == ("then", "tagged")


def test_deleting_an_automation_cancels_its_runs(service, tenant):
    flow = make_automation(tenant, [{"step_type": "delay"}])
    contact = make_contact(tenant, address("deleted"))
    run = trigger(tenant, flow["id"], contact)
    wait_run(tenant, flow["id"], run["id"], status="active", where=lambda r: r["next_wake_at"])
    assert tenant.delete(f"/automations/{flow['id']}").json()["data"]["runs_cancelled"] == 1

    async def stored(db):
        return await db.automation_runs.find_one({"_id": run["id"]})
    assert service.store.run(stored)["status"] == "cancelled"


def test_runs_at_a_removed_step_move_on_to_the_step_that_followed(service, tenant):
    flow = make_automation(tenant, [{"id": "hold", "step_type": "delay", "config": {"duration": 3}},
                                    {"id": "then", "step_type": "tag", "config": {"tagName": "moved-on"}}])
    contact = make_contact(tenant, address("removed"))
    run = trigger(tenant, flow["id"], contact)
    wait_run(tenant, flow["id"], run["id"], status="active", where=lambda r: r["next_wake_at"])
    assert tenant.delete(f"/automations/{flow['id']}/steps/hold").status_code == 200
    done = wait_run(tenant, flow["id"], run["id"])
    assert outcomes(done) == [("hold", "waiting"), ("hold", "step_removed"), ("then", "tagged")]


def test_a_run_whose_contact_is_deleted_is_cancelled(service, tenant):
    flow = make_automation(tenant, [{"id": "wait", "step_type": "wait_for_event",
                                     "config": {"eventType": "page_viewed"}}])
    contact = make_contact(tenant, address("gone"))
    run = trigger(tenant, flow["id"], contact)
    wait_run(tenant, flow["id"], run["id"], status="active", where=lambda r: r["waiting_for"])
    assert tenant.delete(f"/contacts/{contact['id']}").status_code == 200

    async def due_now(db):  # its wait runs out (the clock tests move time; here the store does)
        await db.automation_runs.update_one({"_id": run["id"]}, {"$set": {"wake_ms": 0}})
    service.store.run(due_now)
    cancelled = wait_run(tenant, flow["id"], run["id"], status="cancelled")
    assert cancelled["error"] == "the contact no longer exists"


def test_an_event_read_twice_starts_nothing_new(service, tenant):
    members = make_list(tenant, "Joiners")
    flow = make_automation(tenant, [{"step_type": "tag", "config": {"tagName": "joined"}}],
                           trigger_type="list_joined", trigger_config={"list_id": members["id"], "reentry": "always"})
    contact = make_contact(tenant, address("twice"), list_id=members["id"])
    [run] = wait_until(lambda: runs(tenant, flow["id"], "completed"), what="the list_joined run")
    joined = [e for e in events(service, tenant, "list.member_added") if e["data"]["contact"]["id"] == contact["id"]]

    async def unread(db):  # as if the scheduler died before marking the event read
        await db.outbox.update_one({"_id": joined[0]["_id"]},
                                   {"$set": {"automations_pending": True, outbox.AUTOMATIONS_MS: now_ms()}})
    service.store.run(unread)
    barrier = make_contact(tenant, address("barrier"), list_id=members["id"])  # read after the replayed event
    wait_until(lambda: any(r["contact"]["id"] == barrier["id"] for r in runs(tenant, flow["id"], "completed")),
               what="the barrier's run")
    assert [r["id"] for r in runs(tenant, flow["id"]) if r["contact"]["id"] == contact["id"]] == [run["id"]]
    assert len([e for e in events(service, tenant, "flow.triggered") if e["data"]["run_id"] == run["id"]]) == 1
    assert service.store.run(lambda db: db.outbox.find_one({"_id": joined[0]["_id"]}))["automations_pending"] in (
        False, 0)
