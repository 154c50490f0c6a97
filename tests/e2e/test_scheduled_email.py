"""Scheduled send and cancel on a clock the test controls: the stack's scheduler runs under
libfaketime, and the test moves its clock past each `send_at` in turn (hours ahead, no
waiting for real time). The email waits in the store until its time; a cancelled one never
leaves."""

import datetime as dt
import uuid

import pytest

from pipelines.core.clock import iso, utcnow
from tests.support.api import assert_error
from tests.support.barriers import scheduler_passes
from tests.support.polling import wait_until
from tests.support.private_stack import ControlledClock, private_stack

HOUR = 3600


@pytest.fixture
def clocked(service, store_url, run_dir, tmp_path):
    clock = ControlledClock(tmp_path / "clock")
    # The scheduler runs hours ahead of the worker: a send claim's lease must outlast that,
    # or its watchdog would take a live worker's claims for lapsed and send again.
    lease = {"POSTROOM_SEND_LEASE_SECONDS": str(4 * HOUR)}
    with private_stack(service, store_url, run_dir, "clock", env=lease, scheduler_env=clock.env()) as stack:
        stack.start_worker("worker")
        yield stack, clock


def status_of(tenant, message_id):
    return tenant.get(f"/email/{message_id}/status").json()["data"]


def schedule(tenant, to, seconds):
    response = tenant.post("/email/send", json={"to": to, "subject": "Later", "text": "x",
                                                "send_at": iso(utcnow() + dt.timedelta(seconds=seconds))})
    assert response.status_code == 201, response.text
    return response.json()["data"]


def delivered(tenant, message_id):
    status = status_of(tenant, message_id)
    return status if status["status"] == "delivered" else None


def test_scheduled_emails_leave_when_the_clock_reaches_them_and_a_cancelled_one_never(clocked):
    stack, clock = clocked
    tenant = stack.tenant()
    kept_to, cancelled_to, later_to = (f"{p}-{uuid.uuid4().hex[:8]}@example.org"
                                       for p in ("kept", "cancelled", "later"))
    kept = schedule(tenant, kept_to, HOUR)
    dropped = schedule(tenant, cancelled_to, HOUR)
    later = schedule(tenant, later_to, 3 * HOUR)
    assert tenant.delete(f"/email/{dropped['message_id']}").json()["data"]["status"] == "cancelled"

    scheduler_passes(stack, 3)  # several scheduler passes at the unmoved clock: nothing is due yet
    assert stack.smtp.messages_to(kept_to) == []
    assert status_of(tenant, kept["message_id"])["status"] == "scheduled"

    clock.set(HOUR + 60)
    assert len(stack.smtp.wait_for(kept_to, timeout=20)) == 1
    status = wait_until(lambda: delivered(tenant, kept["message_id"]), timeout=20, what="kept delivered")
    assert [h["status"] for h in status["history"]][:2] == ["scheduled", "queued"]
    assert status["queued_at"] >= kept["scheduled_at"]  # stamped by the scheduler, on its clock
    assert status_of(tenant, later["message_id"])["status"] == "scheduled"  # two hours to go

    clock.set(3 * HOUR + 60)
    stack.smtp.wait_for(later_to, timeout=20)
    wait_until(lambda: delivered(tenant, later["message_id"]), timeout=20, what="later delivered")

    late = tenant.delete(f"/email/{kept['message_id']}")
    assert_error(late, 409, "conflict")
    assert status_of(tenant, dropped["message_id"])["status"] == "cancelled"
    assert stack.smtp.messages_to(cancelled_to) == []


def test_an_address_suppressed_while_its_scheduled_email_waits_is_not_sent_to(clocked):
    stack, clock = clocked
    tenant = stack.tenant()
    alone, kept, dropped = (f"{p}-{uuid.uuid4().hex[:8]}@example.org" for p in ("alone", "kept", "dropped"))
    single = schedule(tenant, alone, HOUR)
    pair = schedule(tenant, [kept, dropped], HOUR)
    for address in (alone, dropped):  # e.g. a complaint or an unsubscribe during the wait
        assert tenant.post("/suppressions", json={"email": address}).status_code == 201

    clock.set(HOUR + 60)
    [received] = stack.smtp.wait_for(kept, timeout=20)
    assert received.message["To"] == kept
    wait_until(lambda: delivered(tenant, pair["message_id"]), timeout=20, what="pair delivered")
    pair_status = status_of(tenant, pair["message_id"])
    assert pair_status["to"] == [kept] and pair_status["suppressed_recipients"] == [dropped]
    single_status = wait_until(lambda: (s := status_of(tenant, single["message_id"]))["status"] == "suppressed" and s,
                               timeout=20, what="single suppressed")
    assert single_status["suppressed_recipients"] == [alone]
    assert stack.smtp.messages_to(alone) == [] and stack.smtp.messages_to(dropped) == []
