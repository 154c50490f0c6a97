"""What follows one attempt, and which subscriptions an event becomes deliveries for."""

import json
import time

from pipelines.adapters.http_client import HttpResult
from pipelines.core.clock import ms_of, now_iso, now_ms
from pipelines.webhooks.delivery import outcome_of
from pipelines.webhooks.events import NEVER_MS, OFF_LANE, lane_due, plan_deliveries

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
    planned = plan_deliveries(EVENT, subs, now_iso())
    assert [d["_id"] for d in planned] == ["ev1:wh1", "ev1:wh2"]
    assert planned == plan_deliveries(EVENT, subs, planned[0]["created_at"])
    body = planned[0]["body"]
    assert json.loads(body) == {"event": "contact.created", "timestamp": EVENT["timestamp"], "data": {"id": "c1"}}
    assert all(d["status"] == "pending" and d["locked_by"] == "" and d["body"] == body for d in planned)
    # due at once, in its subscription's lane
    assert [d["lane_due"] for d in planned] == [lane_due(d["webhook_id"], ms_of(d["created_at"])) for d in planned]
    assert all(d["due_ms"] == ms_of(d["created_at"]) for d in planned)


def test_a_lane_key_orders_a_subscriptions_deliveries_by_when_they_are_due():
    keys = [lane_due("wh1", ms) for ms in (5, 1_700_000_000_000, 99, 12_000)]
    assert sorted(keys) == [lane_due("wh1", ms) for ms in (5, 99, 12_000, 1_700_000_000_000)]
    assert lane_due("wh1", 10**15) < lane_due("wh2", 0)  # lanes never overlap
    assert OFF_LANE < lane_due("", 0)


def test_a_2xx_answer_delivers_and_releases_the_lease():
    outcome = outcome_of(delivery(2), HttpResult(204, 12), scale=1.0)
    assert outcome.changes["status"] == "delivered" and outcome.changes["attempt_count"] == 3
    assert outcome.changes["locked_by"] == ""
    assert (outcome.changes["due_ms"], outcome.changes["lane_due"]) == (NEVER_MS, OFF_LANE)  # off its lane
    assert outcome.attempt["_id"] == "ev1:wh1#3" and outcome.attempt["status_code"] == 204


def test_a_failure_waits_in_the_store_in_its_lane_for_the_scheduled_delay():
    before = now_ms()
    outcome = outcome_of(delivery(0), HttpResult(500, 5, "HTTP 500"), scale=1.0)
    assert "status" not in outcome.changes
    due = outcome.changes["due_ms"]
    assert before + 10_000 <= due <= now_ms() + 10_000  # the table's first wait, 10 s
    assert outcome.changes["lane_due"] == lane_due("wh1", due)
    assert abs(ms_of(outcome.changes["next_attempt_at"]) - due) <= 1
    later = outcome_of(delivery(2), HttpResult(0, 10_000, "timed out after 10 s"), scale=1.0)
    assert later.changes["due_ms"] >= before + 120_000 and later.attempt["error"] == "timed out after 10 s"


def test_the_last_failure_gives_up():
    outcome = outcome_of(delivery(11), HttpResult(502, 5, "HTTP 502"), scale=1.0)
    assert outcome.changes["status"] == "failed" and outcome.changes["lane_due"] == OFF_LANE


def test_a_permanent_failure_gives_up_at_once_and_is_recorded():
    refused = HttpResult(0, 1, "refused: the URL is not a valid URL", permanent=True)
    outcome = outcome_of(delivery(0), refused, scale=1.0)
    assert outcome.changes["status"] == "failed" and outcome.changes["due_ms"] == NEVER_MS
    assert outcome.changes["attempt_count"] == 1 and outcome.attempt["error"] == refused.error


async def test_a_secret_that_does_not_open_is_an_attempt_with_a_reason_not_an_exception():
    """POSTROOM_SECRET_KEY changed since the secret was sealed: nothing is sent unsigned,
    and the attempt ends with a result to record (retried: the operator may restore the key)."""
    from pipelines.core.secret_box import seal
    from pipelines.workflows.deliver_webhooks import send_signed
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
    assert outcome_of(delivery(0), result, scale=1.0).changes["due_ms"] >= now_ms() + 9_000  # retried on schedule


async def test_a_volley_keeps_to_the_endpoint_limit_and_reuses_its_connections():
    """post_volley: never more than `concurrency` requests in flight to the endpoint, over
    kept-alive connections (a real HTTP/1.1 server on loopback counts both)."""
    import asyncio

    from pipelines.adapters.http_client import Session
    from pipelines.core.secret_box import seal
    from pipelines.webhooks.signing import verify
    from pipelines.workflows.deliver_webhooks import post_volley
    seen = {"connections": 0, "in_flight": 0, "most": 0, "verified": 0}

    async def serve(reader, writer):
        seen["connections"] += 1
        while head := await reader.readuntil(b"\r\n\r\n"):
            headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line)
            body = await reader.readexactly(int(headers["Content-Length"]))
            seen["verified"] += verify("whsec_k", headers["X-Service-Signature"], body, time.time())
            seen["in_flight"] += 1
            seen["most"] = max(seen["most"], seen["in_flight"])
            await asyncio.sleep(0.02)
            seen["in_flight"] -= 1
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
            if reader.at_eof():
                break

    async def serve_quietly(reader, writer):
        try:
            await serve(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
    server = await asyncio.start_server(serve_quietly, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    session = Session()
    subscription = {"_id": "wh1", "target_url": f"http://127.0.0.1:{port}/hook",
                    "secret_sealed": seal("whsec_k", "key")}
    volley = [{"_id": f"ev{n}:wh1", "event": "contact.created", "body": '{"n":%d}' % n} for n in range(20)]
    try:
        for _ in range(2):  # a second turn reuses the first one's connections
            results = await post_volley(volley, subscription, secret_key="key", allow_private=True, concurrency=4,
                                        session=session)
            assert [r.status_code for r in results] == [200] * 20
    finally:
        await session.aclose()
        server.close()
        await server.wait_closed()
    assert seen["most"] <= 4 and seen["verified"] == 40
    assert seen["connections"] <= 4
