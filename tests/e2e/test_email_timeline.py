"""GET /email/:id's timeline end to end: mail through the real worker to the real SMTP
sink, which defers first and then accepts; the real front's open pixel and click
redirect; a bounce report submitted to the real inbound port. Each step shows in the
timeline, oldest first, with what SMTP answered."""

from __future__ import annotations

import re
import uuid

import httpx

from tests.support.inbound import dsn, report_done, sent_message, submit, verp
from tests.support.polling import wait_until


def timeline_of(tenant, message_id):
    response = tenant.get(f"/email/{message_id}")
    assert response.status_code == 200, response.text
    return response.json()["data"]


def test_a_deferred_then_delivered_opened_and_clicked_message_shows_each_step(service, tenant):
    to = f"later-{uuid.uuid4().hex[:8]}@example.org"
    service.smtp.defer(to, 1)
    response = tenant.post("/email/send", json={
        "to": to, "subject": "Your receipt", "html": '<p>Hi <a href="https://example.org/receipt">receipt</a></p>',
        "track_opens": True, "track_clicks": True})
    assert response.status_code == 202, response.text
    message_id = response.json()["data"]["message_id"]
    [received] = service.smtp.wait_for(to, timeout=30)
    wait_until(lambda: timeline_of(tenant, message_id)["status"] == "delivered", timeout=30, what="delivered")

    html = received.body("html")
    pixel = re.search(r'<img src="([^"]+/t/o/[^"]+\.gif)"', html).group(1)
    link = re.search(r'href="([^"]+/t/c/[^"]+)"', html).group(1)
    assert httpx.get(pixel, timeout=10).status_code == 200
    assert httpx.get(link, timeout=10, follow_redirects=False).status_code in (301, 302, 303, 307)
    data = wait_until(lambda: (d := timeline_of(tenant, message_id))["status"] == "clicked" and d, what="clicked")

    events = data["timeline"]
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "accepted" and events[0]["status"] == "queued"
    attempts = [e for e in events if e["type"] == "smtp_attempt"]
    assert [(a["code"], a["outcome"]) for a in attempts] == [(451, "deferred"), (250, "delivered")]
    assert attempts[0]["text"] and attempts[0]["next_attempt_at"] > attempts[0]["at"]
    assert attempts[0]["recipients"] == {to: 451}
    assert "rendered" in kinds and kinds.index("rendered") < kinds.index("smtp_attempt")
    [deferred] = [e for e in events if e["type"] == "deferred"]
    assert deferred["detail"].startswith("451")
    order = [k for k in kinds if k in ("deferred", "sent", "delivered", "opened", "clicked")]
    assert order == ["deferred", "sent", "delivered", "opened", "clicked"]
    [clicked] = [e for e in events if e["type"] == "clicked"]
    assert clicked["url"] == "https://example.org/receipt"

    listed = tenant.get("/email", params={"to": to.upper()}).json()["data"]
    assert [m["id"] for m in listed] == [message_id] and listed[0]["status"] == "clicked"


def test_a_bounced_message_shows_the_reports_diagnostic(service, tenant):
    to = f"gone-{uuid.uuid4().hex[:8]}@example.org"
    message_id = sent_message(service, tenant, to)
    raw = dsn(message_id, [{"final": to, "status": "5.1.1", "diagnostic": "550 5.1.1 User unknown"}])
    assert report_done(service, submit(service, raw, verp(message_id)))["status"] == "parsed"

    data = wait_until(lambda: (d := timeline_of(tenant, message_id))["status"] == "bounced" and d, what="bounced")
    kinds = [e["type"] for e in data["timeline"]]
    assert kinds.index("delivered") < kinds.index("bounced")
    [report] = [e for e in data["timeline"] if e["type"] == "bounce_report"]
    assert (report["email"], report["bounce_type"], report["smtp_status"]) == (to, "permanent", "5.1.1")
    assert "User unknown" in report["diagnostic"] and report["bounce_id"]
    listed = tenant.get("/email", params={"status": "bounced", "to": to}).json()["data"]
    assert [m["id"] for m in listed] == [message_id]


def test_a_message_refused_at_smtp_shows_the_refusal_as_its_attempt(service, tenant):
    to = f"refused-{uuid.uuid4().hex[:8]}@example.org"
    service.smtp.reject(to, 550, "5.1.1 no such user")
    response = tenant.post("/email/send", json={"to": to, "subject": "Hi", "text": "hello"})
    message_id = response.json()["data"]["message_id"]
    # the status moves with the outcome; the bounce record of the refusal is written after it
    # by the same job: wait for the record, then read the whole timeline
    data = wait_until(lambda: (d := timeline_of(tenant, message_id))["status"] == "bounced"
                      and any(e["type"] == "bounce_report" for e in d["timeline"]) and d, what="bounced, its record")
    [attempt] = [e for e in data["timeline"] if e["type"] == "smtp_attempt"]
    assert (attempt["code"], attempt["outcome"]) == (550, "bounced") and "no such user" in attempt["text"]
    assert any(e["type"] == "bounce_report" and e["source"] == "smtp" for e in data["timeline"])
