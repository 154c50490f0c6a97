"""What follows one attempt, and which subscriptions an event becomes deliveries for."""

import json

from pipelines.clock import now_iso, parse_iso
from pipelines.outbound_http import HttpResult
from pipelines.webhook_delivery import outcome_of
from pipelines.webhook_events import NEVER, plan_deliveries

EVENT = {"_id": "ev1", "workspace_id": "ws1", "event": "contact.created", "data": {"id": "c1"},
         "timestamp": "2026-05-01T10:00:00.000000Z", "dispatched": False}


def subscription(sid, **overrides):
    return {"_id": sid, "workspace_id": "ws1", "events": ["contact.created"], "active": True,
            "created_at": "2026-05-01T09:00:00.000000Z", **overrides}


def delivery(attempt_count=0):
    return {"_id": "ev1:wh1", "webhook_id": "wh1", "workspace_id": "ws1", "attempt_count": attempt_count}


def test_an_event_becomes_one_delivery_per_matching_subscription_with_a_deterministic_id():
    subs = [subscription("wh1"), subscription("wh2", events=["email.sent", "contact.created"]),
            subscription("other-event", events=["contact.updated"]),
            subscription("other-ws", workspace_id="ws2"), subscription("inactive", active=False),
            subscription("too-new", created_at="2026-05-01T10:00:00.000001Z")]
    planned = plan_deliveries(EVENT, subs, now_iso(), now_iso())
    assert [d["_id"] for d in planned] == ["ev1:wh1", "ev1:wh2"]
    assert planned == plan_deliveries(EVENT, subs, planned[0]["created_at"], planned[0]["handoff_until"])
    body = planned[0]["body"]
    assert json.loads(body) == {"event": "contact.created", "timestamp": EVENT["timestamp"], "data": {"id": "c1"}}
    assert all(d["status"] == "pending" and d["locked_until"] == NEVER and d["body"] == body for d in planned)


def test_a_2xx_answer_delivers_and_releases_the_lease():
    outcome = outcome_of(delivery(2), HttpResult(204, 12), scale=1.0)
    assert outcome.changes["status"] == "delivered" and outcome.changes["attempt_count"] == 3
    assert outcome.changes["locked_by"] == "" and outcome.broker_delay_ms is None
    assert outcome.attempt["_id"] == "ev1:wh1#3" and outcome.attempt["status_code"] == 204


def test_an_early_failure_is_retried_through_the_broker():
    outcome = outcome_of(delivery(0), HttpResult(500, 5, "HTTP 500"), scale=1.0)
    assert outcome.broker_delay_ms == 10_000 and "status" not in outcome.changes
    wait = parse_iso(outcome.changes["next_attempt_at"])
    assert parse_iso(outcome.changes["handoff_until"]) > wait  # the scheduler leaves it to the broker


def test_a_later_failure_waits_in_the_store_for_the_scheduler():
    outcome = outcome_of(delivery(2), HttpResult(0, 10_000, "timed out after 10 s"), scale=1.0)
    assert outcome.broker_delay_ms is None
    assert outcome.changes["handoff_until"] == outcome.changes["next_attempt_at"]
    assert outcome.attempt["error"] == "timed out after 10 s"


def test_the_last_failure_gives_up():
    outcome = outcome_of(delivery(11), HttpResult(502, 5, "HTTP 502"), scale=1.0)
    assert outcome.changes["status"] == "failed" and outcome.broker_delay_ms is None


def test_a_permanent_failure_gives_up_at_once_and_is_recorded():
    refused = HttpResult(0, 1, "refused: the URL is not a valid URL", permanent=True)
    outcome = outcome_of(delivery(0), refused, scale=1.0)
    assert outcome.changes["status"] == "failed" and outcome.broker_delay_ms is None
    assert outcome.changes["attempt_count"] == 1 and outcome.attempt["error"] == refused.error


async def test_a_secret_that_does_not_open_is_an_attempt_with_a_reason_not_an_exception():
    """POSTROOM_SECRET_KEY changed since the secret was sealed: nothing is sent unsigned,
    and the attempt ends with a result to record (retried: the operator may restore the key)."""
    from pipelines.secret_box import seal
    from pipelines.webhook_delivery import send_signed
    from tests.support.http_receiver import HttpReceiver
    receiver = HttpReceiver().start()
    try:
        result = await send_signed(url=receiver.url, sealed_secret=seal("whsec_x", "old key"), secret_key="new key",
                                   body="{}", event="contact.created", delivery_id="d1", webhook_id="w1",
                                   allow_private=True)
    finally:
        receiver.stop()
    assert result.status_code == 0 and not result.permanent and "POSTROOM_SECRET_KEY" in result.error
    assert receiver.received() == []
    assert outcome_of(delivery(0), result, scale=1.0).broker_delay_ms == 10_000  # retried on schedule
