"""A campaign sent through the real front, RabbitMQ, the campaigns/render/send actors and
a real SMTP receiver: audience resolved at send time, sent once, personalised, with
List-Unsubscribe headers, tracked opens and clicks moving the stats."""

import datetime as dt
import re
import uuid

import httpx

from mongo import send_limits
from mongo.recent import FRESH_SECONDS
from pipelines.core.clock import utcnow
from tests.support.api import assert_error
from tests.support.audience import events, make_contact, make_list
from tests.support.barriers import mail_barrier, scheduler_passes
from tests.support.campaigns import (
    make_campaign,
    make_template,
    send,
    wait_campaign,
    wait_until,
)

TEMPLATE = ('<html><body><p>Hi {{first_name|there}}</p>'
            '<p><a href="https://shop.example/sale?x=1&amp;y=2">Sale</a> '
            '<a href="mailto:help@acme.example">Help</a></p>'
            '<p><a href="{{unsubscribe_url}}">Unsubscribe</a></p></body></html>')


def domain_emails(prefix):
    tag = uuid.uuid4().hex[:6]
    return lambda name: f"{name}-{tag}@{prefix}.example"


def set_bounced(service, contact_id):
    async def mark(db):
        await db.contacts.update_one({"_id": contact_id}, {"$set": {"bounced": True}})
    service.store.run(mark)


def test_the_audience_is_resolved_at_send_time_and_each_address_gets_one_personal_email(service, tenant):
    email = domain_emails("aud")
    list_a, list_b = make_list(tenant, "A"), make_list(tenant, "B")
    make_contact(tenant, email("gone"), list_id=list_a["id"])
    assert tenant.post("/contacts/delete-all", json={"confirm": True}).status_code == 200
    alice = make_contact(tenant, email("alice"), first_name="Alice", list_id=list_a["id"])
    bob = make_contact(tenant, email("bob"), first_name="Bob", list_id=list_b["id"])
    both = make_contact(tenant, email("both"), first_name="Both", list_id=list_a["id"])
    assert tenant.post(f"/lists/{list_b['id']}/members", json={"contact_ids": [both["id"]]}).status_code in (200, 201)
    make_contact(tenant, email("quiet"), subscribed=False, list_id=list_a["id"])
    set_bounced(service, make_contact(tenant, email("bounced"), list_id=list_a["id"])["id"])
    make_contact(tenant, email("blocked"), list_id=list_b["id"])
    assert tenant.post("/suppressions", json={"email": email("blocked")}).status_code == 201
    make_contact(tenant, email("outsider"))
    segment = tenant.post("/segments", json={"name": "A or B", "conditions": {
        "match": "all", "rules": [{"field": "lists", "operator": "in", "value": [list_a["id"], list_b["id"]]}]}})
    assert segment.status_code == 201, segment.text
    campaign = make_campaign(tenant, template_id=make_template(tenant, TEMPLATE)["id"],
                             segment_id=segment.json()["data"]["id"], from_name="Acme News")

    key = uuid.uuid4().hex
    started = send(tenant, campaign["id"], key)
    assert started.status_code == 202, started.text
    assert started.json()["data"]["total_recipients"] == 3
    assert started.json()["data"]["batches_queued"] == 1
    replay = send(tenant, campaign["id"], key)
    assert replay.headers["X-Idempotency-Status"] == "cached" and replay.json() == started.json()
    assert_error(send(tenant, campaign["id"]), 409, "conflict")

    done = wait_campaign(tenant, campaign["id"], "sent")
    for contact, name in ((alice, "Alice"), (bob, "Bob"), (both, "Both")):
        [received] = service.smtp.wait_for(contact["email"])
        assert received.message["Subject"] == f"Hello {name}"
        assert f"Hi {name}" in received.body("html")
        message_id = received.mail_from.split("+", 1)[1].split("@")[0]
        unsubscribe = received.message["List-Unsubscribe"]
        assert f"<mailto:unsubscribe+{message_id}@bounces.postroom.test>" in unsubscribe
        assert re.search(r"<http://127\.0\.0\.1:\d+/u/[\w\-]+>", unsubscribe)
        assert received.message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    for name in ("gone", "quiet", "bounced", "blocked", "outsider"):
        assert service.smtp.messages_to(email(name)) == []
    assert done["stats"]["sent"] == done["stats"]["delivered"] == 3
    assert done["rates"]["delivery_rate"] == 1.0
    assert done["completed_at"] and done["started_at"]
    assert len(events(service, tenant, "campaign.sent")) == 1
    completed = wait_until(lambda: events(service, tenant, "campaign.completed"))
    assert completed[0]["data"]["campaign_id"] == campaign["id"]
    scheduler_passes(service)  # a watchdog or fan-out that ran again would have sent by now
    mail_barrier(service)  # and what such a pass published is queued ahead of the sentinel
    assert len(service.smtp.messages_to(both["email"])) == 1


def test_opens_and_clicks_move_the_message_the_stats_and_emit_one_event_each(service, tenant):
    reader = make_contact(tenant, f"reader-{uuid.uuid4().hex[:6]}@track.example", first_name="Ria")
    members = make_list(tenant, "Readers")
    tenant.post(f"/lists/{members['id']}/members", json={"contact_ids": [reader["id"]]})
    campaign = make_campaign(tenant, template_id=make_template(tenant, TEMPLATE)["id"], list_id=members["id"])
    assert send(tenant, campaign["id"]).status_code == 202
    [received] = service.smtp.wait_for(reader["email"])
    html = received.body("html")
    pixel = re.search(r'<img src="([^"]+/t/o/[^"]+\.gif)"', html).group(1)
    clicks = re.findall(r'href="([^"]+/t/c/[^"]+)"', html)
    assert len(clicks) == 1, "only the web link is tracked: mailto and unsubscribe are left alone"
    assert 'href="mailto:help@acme.example"' in html and "/u/" in html
    message_id = received.mail_from.split("+", 1)[1].split("@")[0]
    wait_campaign(tenant, campaign["id"], "sent")

    with httpx.Client(timeout=10) as browser:
        for _ in range(2):
            seen = browser.get(pixel)
            assert seen.status_code == 200 and seen.headers["content-type"] == "image/gif"
            assert seen.content.startswith(b"GIF89a")
        for _ in range(3):
            hop = browser.get(clicks[0], follow_redirects=False)
            assert hop.status_code == 302
            assert hop.headers["location"] == "https://shop.example/sale?x=1&y=2"
        token = clicks[0].rsplit("/", 1)[1]
        forged = clicks[0].rsplit("/", 1)[0] + "/" + token[:-2] + ("AA" if not token.endswith("AA") else "BB")
        assert browser.get(forged, follow_redirects=False).status_code == 404
        pixel_as_click = pixel.replace("/t/o/", "/t/c/").removesuffix(".gif")
        assert browser.get(pixel_as_click, follow_redirects=False).status_code == 404
        bogus = browser.get(pixel[:-10] + "xx.gif")
        assert bogus.status_code == 200 and bogus.content.startswith(b"GIF89a")

    stats = tenant.get(f"/campaigns/{campaign['id']}").json()["data"]
    assert (stats["stats"]["opened"], stats["stats"]["opens_total"]) == (1, 2)
    assert (stats["stats"]["clicked"], stats["stats"]["clicks_total"]) == (1, 3)
    assert stats["rates"]["open_rate"] == 1.0 and stats["rates"]["click_rate"] == 1.0
    status = tenant.get(f"/email/{message_id}/status").json()["data"]
    assert status["status"] == "clicked" and status["opened_at"] and status["clicked_at"]
    assert len(events(service, tenant, "email.opened")) == 1
    [clicked] = events(service, tenant, "email.clicked")
    assert clicked["data"]["url"] == "https://shop.example/sale?x=1&y=2"
    assert clicked["data"]["campaign_id"] == campaign["id"]
    analytics = tenant.get("/analytics", params={"period": "1d"}).json()["data"]
    assert analytics["totals"]["opens"] == 1 and analytics["totals"]["clicks"] == 1


def test_a_campaign_without_tracking_has_no_pixel_and_untouched_links(service, tenant):
    reader = make_contact(tenant, f"plain-{uuid.uuid4().hex[:6]}@track.example")
    members = make_list(tenant, "Plain")
    tenant.post(f"/lists/{members['id']}/members", json={"contact_ids": [reader["id"]]})
    campaign = make_campaign(tenant, template_id=make_template(tenant, TEMPLATE)["id"], list_id=members["id"],
                             track_opens=False, track_clicks=False)
    assert send(tenant, campaign["id"]).status_code == 202
    html = service.smtp.wait_for(reader["email"])[0].body("html")
    assert "/t/o/" not in html and "/t/c/" not in html
    assert 'href="https://shop.example/sale?x=1&amp;y=2"' in html


def test_a_campaign_with_nobody_to_send_to_is_sent_at_once(service, tenant):
    empty = make_list(tenant, "Empty")
    campaign = make_campaign(tenant, template_id=make_template(tenant)["id"], list_id=empty["id"])
    started = send(tenant, campaign["id"])
    assert started.status_code == 202
    assert started.json()["data"]["total_recipients"] == 0 and started.json()["data"]["batches_queued"] == 0
    wait_campaign(tenant, campaign["id"], "sent")
    wait_until(lambda: events(service, tenant, "campaign.completed"))


def test_a_scheduled_campaign_is_started_by_the_scheduler_when_due(service, tenant):
    reader = make_contact(tenant, f"later-{uuid.uuid4().hex[:6]}@sched.example")
    members = make_list(tenant, "Later")
    tenant.post(f"/lists/{members['id']}/members", json={"contact_ids": [reader["id"]]})
    campaign = make_campaign(tenant, template_id=make_template(tenant)["id"], list_id=members["id"])
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)
    scheduled = tenant.post(f"/campaigns/{campaign['id']}/schedule", json={"send_at": when.isoformat()}).json()["data"]
    assert scheduled["status"] == "scheduled"
    assert service.smtp.messages_to(reader["email"]) == []
    service.smtp.wait_for(reader["email"], timeout=30)
    done = wait_campaign(tenant, campaign["id"], "sent")
    assert done["started_at"] >= done["scheduled_at"], done
    assert done["total_recipients"] == 1


def test_cancelling_a_sending_campaign_stops_what_has_not_left(service, tenant):
    """The recipients' domain takes 5 emails a minute, so 5 leave and the rest wait in
    the throttle; the cancel stops every one that has not left."""
    domain = f"cancel-{uuid.uuid4().hex[:6]}.example"
    service.store.run(send_limits.set_domain_limit, domain, rate_per_minute=5, concurrency=5)
    members = make_list(tenant, "Many")
    addresses = [f"r{i}@{domain}" for i in range(20)]
    for address in addresses:
        make_contact(tenant, address, list_id=members["id"])
    campaign = make_campaign(tenant, template_id=make_template(tenant)["id"], list_id=members["id"])
    assert send(tenant, campaign["id"]).json()["data"]["total_recipients"] == 20

    def received():
        return sum(len(service.smtp.messages_to(a)) for a in addresses)
    wait_until(lambda: received() >= 5, timeout=30)
    cancelled = tenant.post(f"/campaigns/{campaign['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["data"]["status"] == "cancelled"
    final = wait_until(lambda: (lambda c: c if c["stats"]["pending"] == 0 else None)(
        tenant.get(f"/campaigns/{campaign['id']}").json()["data"]), timeout=30)
    scheduler_passes(service)  # the throttle's releases and the watchdog ran after the cancel
    mail_barrier(service)  # and what they or the cancelled jobs published is queued ahead of the sentinel
    assert received() == 5
    assert final["status"] == "cancelled"
    assert final["stats"]["delivered"] == 5 and final["stats"]["cancelled"] == 15
    assert_error(send(tenant, campaign["id"]), 409, "conflict")
    assert events(service, tenant, "campaign.completed") == []
    # charged 20 when sending started; the 15 that never left go back to the plan, once
    month = utcnow().strftime("%Y-%m")
    wait_until(lambda: service.store.run(send_limits.plan_used, tenant.workspace_id, month) == 5, timeout=20)
    scheduler_passes(service)  # more scheduler passes: nothing is given back twice
    assert service.store.run(send_limits.plan_used, tenant.workspace_id, month) == 5


def reports_processed(service, message_id: str) -> int:
    """Inbound reports about `message_id` that the bounces actor has finished with."""
    async def count(db):
        docs = await db.inbound_reports.find({"status": {"$ne": "received"}}, {"raw": 1}).to_list()
        return sum(message_id in d["raw"] for d in docs)
    return service.store.call(count(service.store.db))


def test_a_spam_complaint_counts_once_on_the_campaign(service, tenant):
    import asyncio

    import aiosmtplib

    from tests.support import reports
    recipient = f"angry-{uuid.uuid4().hex[:6]}@yahoo.com"
    members = make_list(tenant, "Complainers")
    make_contact(tenant, recipient, list_id=members["id"])
    campaign = make_campaign(tenant, template_id=make_template(tenant)["id"], list_id=members["id"])
    assert send(tenant, campaign["id"]).status_code == 202
    [received] = service.smtp.wait_for(recipient)
    message_id = received.mail_from.split("+", 1)[1].split("@")[0]
    report = reports.load("yahoo_arf", recipient=recipient, message_id=message_id)
    for _ in range(2):
        asyncio.run(aiosmtplib.send(report, sender="feedback@yahoo.com", recipients=["fbl@bounces.postroom.test"],
                                    hostname="127.0.0.1", port=int(service.env["POSTROOM_INBOUND_PORT"])))
    wait_until(lambda: events(service, tenant, "email.complained"))
    stats = wait_until(lambda: (lambda d: d if d["stats"]["complained"] else None)(
        tenant.get(f"/campaigns/{campaign['id']}").json()["data"]))
    wait_until(lambda: reports_processed(service, message_id) == 2)  # the second one too
    assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["stats"]["complained"] == 1
    assert stats["rates"]["complaint_rate"] == 1.0


def test_a_campaign_that_would_pass_the_monthly_plan_limit_is_refused_and_sends_nothing(service):
    tenant = service.tenant()
    email = domain_emails("plan")

    async def limit(db, n):
        await db.workspaces.update_one({"_id": tenant.workspace_id}, {"$set": {"monthly_email_limit": n}})
    service.store.run(limit, 3)
    members = make_list(tenant, "Plan")
    for name in ("a", "b", "c"):
        make_contact(tenant, email(name), list_id=members["id"])
    assert tenant.post("/email/send", json={"to": email("receipt"), "subject": "Hi", "text": "x"}).status_code == 202
    campaign = make_campaign(tenant, template_id=make_template(tenant)["id"], list_id=members["id"])
    assert_error(send(tenant, campaign["id"]), 403, "limit_reached")  # 1 used + 3 recipients > 3
    assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["status"] == "draft"
    sandbox = service.extra_key(tenant, sandbox=True)
    sandbox_campaign = make_campaign(sandbox, template_id=make_template(tenant)["id"], list_id=members["id"])
    assert send(sandbox, sandbox_campaign["id"]).status_code == 202  # sandbox keys count nothing
    wait_campaign(tenant, sandbox_campaign["id"], "sent")
    service.smtp.wait_for(email("receipt"))
    for name in ("a", "b", "c"):
        assert service.smtp.messages_to(email(name)) == []

    service.store.run(limit, 4)
    # A limit changed in the store reaches the front within mongo/recent.FRESH_SECONDS; a
    # refused start charges nothing, so asking again until then is harmless.
    wait_until(lambda: send(tenant, campaign["id"]).status_code == 202, timeout=FRESH_SECONDS + 5,
               interval=0.5, what="the campaign accepted under the raised limit")
    wait_campaign(tenant, campaign["id"], "sent")
    for name in ("a", "b", "c"):
        service.smtp.wait_for(email(name))
    refused = tenant.post("/email/send", json={"to": email("late"), "subject": "Hi", "text": "x"})
    assert_error(refused, 403, "limit_reached")
