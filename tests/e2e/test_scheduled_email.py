"""Scheduled send and cancel with a clock we control: `send_at` a few seconds ahead of
the real clock, polled (never a fixed sleep as the assertion). The email waits in the
store and the scheduler hands it to the broker when due."""

import datetime as dt
import time
import uuid

from pipelines.clock import iso, utcnow

LEAD_SECONDS = 3


def status_of(tenant, message_id):
    return tenant.get(f"/email/{message_id}/status").json()["data"]


def schedule(tenant, to, seconds):
    response = tenant.post("/email/send", json={"to": to, "subject": "Later", "text": "x",
                                                "send_at": iso(utcnow() + dt.timedelta(seconds=seconds))})
    assert response.status_code == 201, response.text
    return response.json()["data"]


def test_a_scheduled_email_is_sent_when_due_and_a_cancelled_one_never(service, tenant):
    kept_to, cancelled_to = (f"{p}-{uuid.uuid4().hex[:8]}@example.org" for p in ("kept", "cancelled"))
    kept = schedule(tenant, kept_to, LEAD_SECONDS)
    dropped = schedule(tenant, cancelled_to, LEAD_SECONDS)
    assert tenant.delete(f"/email/{dropped['message_id']}").json()["data"]["status"] == "cancelled"
    assert service.smtp.messages_to(kept_to) == []  # not before it is due

    [received] = service.smtp.wait_for(kept_to, timeout=LEAD_SECONDS + 15)
    deadline = time.monotonic() + 15
    while status_of(tenant, kept["message_id"])["status"] != "delivered" and time.monotonic() < deadline:
        time.sleep(0.1)
    status = status_of(tenant, kept["message_id"])
    assert status["status"] == "delivered"
    assert [h["status"] for h in status["history"]][:2] == ["scheduled", "queued"]
    assert status["queued_at"] >= kept["scheduled_at"]

    late = tenant.delete(f"/email/{kept['message_id']}")
    assert late.status_code == 409 and late.json()["error"]["code"] == "conflict"
    assert status_of(tenant, dropped["message_id"])["status"] == "cancelled"
    assert service.smtp.messages_to(cancelled_to) == []
