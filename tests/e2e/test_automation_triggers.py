"""Every event trigger through the real stack: the service records its usual outbox event
(contact created, list joined, tag added, email opened or clicked, product viewed,
conversion, form submitted), the scheduler reads it once, and the matching automation's
run starts for that contact — and only the matching one (a filter that does not match is
checked against a barrier: a later event of the same kind that does start a run). Re-entry
rules per trigger_config. (date_attribute is in tests/e2e/test_automation_clock.py.)"""

import re
import uuid

import httpx

from mongo import outbox
from tests.support.audience import events, make_contact, make_list, make_tag
from tests.support.automations import make_automation, outcomes, runs
from tests.support.campaigns import make_template
from tests.support.forms import make_form
from tests.support.polling import wait_until

TRACKED = '<html><body><p>Hello</p><p><a href="https://shop.example/deal">Deal</a></p></body></html>'


def address(name):
    return f"{name}-{uuid.uuid4().hex[:8]}@trig.example"


def tag_step(name):
    return [{"id": "mark", "step_type": "tag", "config": {"tagName": name}}]


def runs_for(tenant, automation_id, contact_id, status="completed"):
    return [r for r in runs(tenant, automation_id, status) if r["contact"]["id"] == contact_id]


def one_run(tenant, automation_id, contact_id):
    [run] = wait_until(lambda: runs_for(tenant, automation_id, contact_id), what="a completed run")
    return run


def test_contact_created_starts_a_run_for_the_new_contact(service, tenant):
    flow = make_automation(tenant, tag_step("new"), trigger_type="contact_created")
    contact = make_contact(tenant, address("new"))
    run = one_run(tenant, flow["id"], contact["id"])
    assert run["trigger"]["type"] == "contact_created" and run["trigger"]["event_id"]
    assert run["trigger"]["data"]["contact"]["email"] == contact["email"]
    assert outcomes(run) == [("mark", "tagged")]
    triggered = [e for e in events(service, tenant, "flow.triggered") if e["data"]["run_id"] == run["id"]]
    assert triggered[0]["data"]["trigger"]["type"] == "contact_created"


def test_list_joined_fires_for_its_list_only_and_re_entry_follows_the_config(service, tenant):
    watched, other = make_list(tenant, "Watched"), make_list(tenant, "Other")
    once = make_automation(tenant, tag_step("once"), trigger_type="list_joined",
                           trigger_config={"list_id": watched["id"]}, name="once")
    every = make_automation(tenant, tag_step("every"), trigger_type="list_joined",
                            trigger_config={"list_id": watched["id"], "reentry": "always"}, name="every")
    barrier_flow = make_automation(tenant, tag_step("other"), trigger_type="list_joined",
                                   trigger_config={"list_id": other["id"]}, name="barrier")
    contact = make_contact(tenant, address("joiner"))
    members = f"/lists/{watched['id']}/members"
    assert tenant.post(members, json={"contact_ids": [contact["id"]]}).status_code in (200, 201)
    one_run(tenant, every["id"], contact["id"])
    tenant.delete(members, json={"contact_ids": [contact["id"]]})
    tenant.post(members, json={"contact_ids": [contact["id"]]})
    wait_until(lambda: len(runs_for(tenant, every["id"], contact["id"])) == 2, what="a second `always` run")
    # joining another list fires that list's automation: a barrier for `once`, read after both joins
    tenant.post(f"/lists/{other['id']}/members", json={"contact_ids": [contact["id"]]})
    one_run(tenant, barrier_flow["id"], contact["id"])
    assert len(runs_for(tenant, once["id"], contact["id"])) == 1


def test_tag_added_fires_and_after_exit_re_entry_waits_for_the_open_run_to_end(service, tenant):
    vip = make_tag(tenant, "vip")
    flow = make_automation(tenant, [{"id": "wait", "step_type": "wait_for_event", "config": {"eventType": "purchase"}}],
                           trigger_type="tag_added", trigger_config={"tag_id": vip["id"], "reentry": "after_exit"})
    marker = make_automation(tenant, tag_step("seen"), trigger_type="tag_added",
                             trigger_config={"tag_id": vip["id"], "reentry": "always"}, name="marker")
    contact = make_contact(tenant, address("vip"))
    assign = f"/tags/{vip['id']}/contacts"

    def retag():
        tenant.delete(assign, json={"contact_ids": [contact["id"]]})
        assert tenant.post(assign, json={"contact_ids": [contact["id"]]}).json()["data"]["assigned"] == 1

    assert tenant.post(assign, json={"contact_ids": [contact["id"]]}).status_code == 200
    [first] = wait_until(lambda: runs_for(tenant, flow["id"], contact["id"], "active"), what="the first run")
    assert first["trigger"]["data"]["tag"] == {"id": vip["id"], "name": "vip"}
    retag()  # while the first run is open: refused
    wait_until(lambda: len(runs_for(tenant, marker["id"], contact["id"])) == 2, what="the marker's second run")
    assert [r["id"] for r in runs(tenant, flow["id"])] == [first["id"]]
    assert tenant.post(f"/automations/{flow['id']}/runs/{first['id']}/cancel").status_code == 200
    retag()  # the first run ended: a new one starts
    wait_until(lambda: len(runs_for(tenant, flow["id"], contact["id"], "active")) == 1, what="a second run")


def _send_tracked(tenant, to, template_id):
    response = tenant.post("/email/send", json={"to": to, "subject": "Hi", "template_id": template_id,
                                                "track_opens": True, "track_clicks": True})
    assert response.status_code == 202, response.text
    return response.json()["data"]["message_id"]


def test_email_opened_and_clicked_fire_with_an_optional_template_filter(service, tenant):
    wanted, other = make_template(tenant, TRACKED, name="wanted"), make_template(tenant, TRACKED, name="other")
    opened_wanted = make_automation(tenant, tag_step("opened-wanted"), trigger_type="email_opened",
                                    trigger_config={"template_id": wanted["id"]}, name="opened wanted")
    opened_any = make_automation(tenant, tag_step("opened-any"), trigger_type="email_opened",
                                 trigger_config={"reentry": "always"}, name="opened any")
    clicked = make_automation(tenant, tag_step("clicked"), trigger_type="email_clicked", name="clicked")
    contact = make_contact(tenant, address("reader"))
    other_id = _send_tracked(tenant, contact["email"], other["id"])
    wanted_id = _send_tracked(tenant, contact["email"], wanted["id"])
    mails = {m.message["Message-ID"].strip("<>").split("@")[0]: m
             for m in service.smtp.wait_for(contact["email"], count=2)}

    def open_(message_id):
        pixel = re.search(r'<img src="([^"]+/t/o/[^"]+\.gif)"', mails[message_id].body()).group(1)
        assert httpx.get(pixel).status_code == 200

    open_(other_id)  # the other template's email: `opened any` starts a run, `opened wanted` does not
    [first] = wait_until(lambda: runs_for(tenant, opened_any["id"], contact["id"]), what="the first open's run")
    assert first["trigger"]["data"]["message_id"] == other_id
    assert runs(tenant, opened_wanted["id"]) == []  # read in the same pass as `first`'s event
    open_(wanted_id)
    [run] = wait_until(lambda: runs_for(tenant, opened_wanted["id"], contact["id"]), what="the wanted open's run")
    assert run["trigger"]["type"] == "email_opened" and run["trigger"]["data"]["message_id"] == wanted_id
    wait_until(lambda: len(runs_for(tenant, opened_any["id"], contact["id"])) == 2, what="the second open's run")

    link = re.search(r'href="([^"]+/t/c/[^"]+)"', mails[wanted_id].body()).group(1)
    assert httpx.get(link, follow_redirects=False).status_code == 302
    click_run = one_run(tenant, clicked["id"], contact["id"])
    assert click_run["trigger"]["data"]["message_id"] == wanted_id
    assert click_run["trigger"]["data"]["url"] == "https://shop.example/deal"


def test_product_viewed_fires_with_an_optional_product_filter(service, tenant):
    shoes = make_automation(tenant, tag_step("shoes"), trigger_type="product_viewed",
                            trigger_config={"product_id": "shoes-1", "reentry": "always"}, name="shoes")
    anything = make_automation(tenant, tag_step("viewer"), trigger_type="product_viewed",
                               trigger_config={"reentry": "always"}, name="anything")
    contact = make_contact(tenant, address("shopper"))
    for product in ("hat-9", "shoes-1"):
        response = tenant.post("/track/product-view", json={"contact_email": contact["email"], "product_id": product,
                                                            "price": "10.00"})
        assert response.status_code == 201
    wait_until(lambda: len(runs_for(tenant, anything["id"], contact["id"])) == 2, what="two view runs")
    [run] = runs_for(tenant, shoes["id"], contact["id"])
    assert run["trigger"]["data"]["product"]["product_id"] == "shoes-1"


def test_conversion_created_fires_for_the_buyer(service, tenant):
    flow = make_automation(tenant, tag_step("buyer"), trigger_type="conversion_created")
    contact = make_contact(tenant, address("buyer"))
    assert tenant.post("/conversions", json={"contact_id": contact["id"], "value": "42.50"}).status_code == 201
    run = one_run(tenant, flow["id"], contact["id"])
    assert run["trigger"]["data"]["conversion"]["value"] == "42.50"


def test_form_submitted_fires_on_the_forms_event_for_its_form_only(service, tenant):
    forms = {name: make_form(tenant, name=name, double_opt_in=False)["id"] for name in ("signup", "survey")}
    signup = make_automation(tenant, tag_step("signup"), trigger_type="form_submitted",
                             trigger_config={"form_id": forms["signup"]}, name="signup")
    survey = make_automation(tenant, tag_step("survey"), trigger_type="form_submitted",
                             trigger_config={"form_id": forms["survey"]}, name="survey")
    contact = make_contact(tenant, address("former"))
    # what the forms feature records is the spec's form.submitted through the outbox
    for form in forms.values():
        service.store.run(outbox.record, tenant.workspace_id, "form.submitted",
                          {"form": {"id": form}, "contact": {"id": contact["id"], "email": contact["email"]}})
    assert one_run(tenant, signup["id"], contact["id"])["trigger"]["data"]["form"] == {"id": forms["signup"]}
    assert one_run(tenant, survey["id"], contact["id"])["trigger"]["type"] == "form_submitted"


def test_a_draft_or_paused_automation_takes_no_trigger(service, tenant):
    draft = make_automation(tenant, tag_step("draft"), trigger_type="contact_created", active=False, name="draft")
    paused = make_automation(tenant, tag_step("paused"), trigger_type="contact_created", name="paused")
    tenant.patch(f"/automations/{paused['id']}", json={"status": "paused"})
    barrier = make_automation(tenant, tag_step("live"), trigger_type="contact_created", name="live")
    contact = make_contact(tenant, address("ignored"))
    one_run(tenant, barrier["id"], contact["id"])
    assert runs(tenant, draft["id"]) == [] and runs(tenant, paused["id"]) == []
