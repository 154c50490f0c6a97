"""What the send step does with each recipient's SMTP answer."""

import datetime as dt

from pipelines.core.clock import iso, utcnow
from pipelines.messages.outcomes import Outcome, plan_outcomes
from pipelines.messages.retry_schedule import SMTP

DAY = 24 * 3600
LIFETIME = 5 * DAY


def moves(plan) -> list[tuple]:
    """The plan's transitions as (message id, new status, fields, detail, via)."""
    return [(t.message_id, t.to, dict(t.fields), t.detail, t.via) for t in plan.transitions]


def message(i=1, to=("a@example.org",), attempts=0, batch_id="batch_1", kind="transactional"):
    return {"_id": f"m{i}", "workspace_id": "ws", "to": list(to), "subject": "Hi",
            "attempts": attempts, "batch_id": batch_id, "kind": kind, "campaign_id": None}


def test_an_accepted_message_is_delivered_via_sent_with_both_events():
    plan = plan_outcomes([(message(), {"a@example.org": Outcome(250, "ok")})])
    [(mid, status, extra, detail, via)] = moves(plan)
    assert (mid, status, via) == ("m1", "delivered", ("sent",)) and extra["smtp_response"] == "250 ok"
    assert [e["event"] for e in plan.events] == ["email.sent", "email.delivered"]
    assert [e["_id"] for e in plan.events] == ["m1:email.sent", "m1:email.delivered"]
    assert plan.finished == [(message(), "delivered")]
    [counts] = plan.analytics.values()
    assert counts == {"sends": 1, "delivered": 1, "api_sends": 1}


def test_a_permanent_refusal_bounces_at_once_and_records_the_bounce():
    plan = plan_outcomes([(message(), {"a@example.org": Outcome(550, "5.1.1 unknown")})])
    assert moves(plan)[0][1] == "bounced" and plan.retry_ids == []
    assert plan.bounces == [{"message": message(), "email": "a@example.org", "code": 550,
                             "text": "5.1.1 unknown"}]
    assert plan.finished[0][1] == "bounced"


def test_a_transient_refusal_is_retried_with_backoff():
    plan = plan_outcomes([(message(attempts=2), {"a@example.org": Outcome(451, "later")})])
    assert plan.retry_ids == ["m1"] and plan.transitions == [] and plan.finished == []
    assert plan.next_attempts["m1"].delay_seconds == SMTP.delays_seconds[2] == 30
    assert plan.retry_notes["m1"] == "451 later"


def test_the_first_deferral_starts_the_lifetime_clock_and_short_waits_ride_the_broker():
    now = utcnow()
    plan = plan_outcomes([(message(), {"a@example.org": Outcome(451, "later")})], now=now)
    attempts = plan.retry_progress["m1"].pop("smtp_attempts")
    assert plan.retry_progress["m1"] == {"deferred_since": iso(now)}
    # the attempt is kept: its reply, and when the next one is due
    assert [{k: a[k] for k in ("at", "code", "outcome", "next_attempt_at")} for a in attempts] == [
        {"at": iso(now), "code": 451, "outcome": "deferred", "next_attempt_at": iso(now + dt.timedelta(seconds=5))}]
    assert plan.retries_by_broker_delay() == {5000: ["m1"]} and plan.retries_in_store(now) == {}


def test_longer_waits_are_held_in_the_store_and_back_off_to_hours():
    now = utcnow()
    since = iso(now - dt.timedelta(hours=3))
    late = {**message(attempts=12), "deferred_since": since}
    plan = plan_outcomes([(late, {"a@example.org": Outcome(0, "connection failed")})], now=now)
    assert plan.retries_by_broker_delay() == {}
    assert plan.retries_in_store(now) == {"m1": iso(now + dt.timedelta(hours=4))}
    assert "deferred_since" not in plan.retry_progress.get("m1", {})  # the clock keeps its start


def test_the_scale_shortens_waits_but_keeps_their_path():
    now = utcnow()
    plan = plan_outcomes([(message(attempts=5), {"a@example.org": Outcome(451, "later")})], now=now, scale=0.01)
    assert plan.retries_in_store(now) == {"m1": iso(now + dt.timedelta(seconds=6))}  # 10 min × 0.01


def test_the_last_attempt_falls_on_the_end_of_the_lifetime_and_then_it_gives_up():
    now = utcnow()
    nearly = {**message(attempts=30), "deferred_since": iso(now - dt.timedelta(seconds=LIFETIME - 600))}
    plan = plan_outcomes([(nearly, {"a@example.org": Outcome(451, "later")})], now=now, lifetime_seconds=LIFETIME)
    assert plan.next_attempts["m1"].delay_seconds == 600
    spent = {**message(attempts=31), "deferred_since": iso(now - dt.timedelta(seconds=LIFETIME))}
    plan = plan_outcomes([(spent, {"a@example.org": Outcome(451, "later")})], now=now, lifetime_seconds=LIFETIME)
    [(_, status, extra, detail, via)] = moves(plan)
    assert status == "failed" and detail == "gave up after 32 attempts over 120.0 h: 451 later" and via == ()


def test_a_lost_connection_is_transient():
    plan = plan_outcomes([(message(), {"a@example.org": Outcome(0, "connection failed")})])
    assert plan.retry_ids == ["m1"]


def spent(msg: dict) -> dict:
    """A message deferred for longer than the retry lifetime."""
    return {**msg, "deferred_since": iso(utcnow() - dt.timedelta(seconds=LIFETIME + 1))}


def test_transient_failures_give_up_once_the_lifetime_is_spent():
    plan = plan_outcomes([(spent(message(attempts=30)), {"a@example.org": Outcome(451, "later")})],
                         lifetime_seconds=LIFETIME)
    assert moves(plan)[0][1] == "failed" and plan.finished[0][1] == "failed"


def test_a_recipient_refused_here_fails_the_message_without_a_bounce():
    why = Outcome(553, "5.6.7 not sent: needs SMTPUTF8", local=True)
    plan = plan_outcomes([(message(to=("jürgen@example.org",)), {"jürgen@example.org": why})])
    [(_, status, extra, detail, via)] = moves(plan)
    assert status == "failed" and detail == "553 5.6.7 not sent: needs SMTPUTF8" and extra["error"] == detail
    assert via == ()
    assert plan.bounces == [] and plan.retry_ids == [] and plan.analytics == {}


def test_a_partly_accepted_message_is_delivered_and_bounces_the_refused_recipient():
    outcomes = {"a@example.org": Outcome(250, "ok"), "b@example.org": Outcome(550, "no")}
    plan = plan_outcomes([(message(to=("a@example.org", "b@example.org")), outcomes)])
    assert moves(plan)[0][1] == "delivered"
    assert [b["email"] for b in plan.bounces] == ["b@example.org"]


def test_a_message_without_rendered_mime_fails_alone():
    plan = plan_outcomes([(message(1), None), (message(2), {"a@example.org": Outcome(250, "ok")})])
    assert [(t[0], t[1]) for t in moves(plan)] == [("m1", "failed"), ("m2", "delivered")]


def test_campaign_mail_counts_as_a_campaign_send():
    plan = plan_outcomes([(message(kind="campaign"), {"a@example.org": Outcome(250, "ok")})])
    [counts] = plan.analytics.values()
    assert counts["campaign_sends"] == 1 and "api_sends" not in counts


TRIO = ("a@example.org", "b@example.org", "c@example.org")


def test_a_recipient_deferred_beside_accepted_ones_is_retried_alone_and_the_message_waits():
    outcomes = {"a@example.org": Outcome(250, "ok"), "b@example.org": Outcome(451, "greylisted"),
                "c@example.org": Outcome(550, "no such user")}
    now = utcnow()
    plan = plan_outcomes([(message(to=TRIO), outcomes)], now=now)
    assert plan.retry_ids == ["m1"] and plan.transitions == [] and plan.events == [] and plan.finished == []
    [attempt] = plan.retry_progress["m1"].pop("smtp_attempts")
    assert attempt["recipients"] == {"a@example.org": 250, "b@example.org": 451, "c@example.org": 550}
    assert plan.retry_progress["m1"] == {"accepted_recipients": ["a@example.org"],
                                         "refused_recipients": ["c@example.org"], "deferred_since": iso(now)}
    assert plan.retry_notes["m1"] == "451 greylisted (1 of 3 recipients still owed)"
    assert [b["email"] for b in plan.bounces] == ["c@example.org"]  # the 5xx bounces now, once


def test_the_retry_that_settles_the_last_recipient_delivers_the_message():
    earlier = {**message(to=TRIO, attempts=1), "accepted_recipients": ["a@example.org"],
               "refused_recipients": ["c@example.org"]}
    plan = plan_outcomes([(earlier, {"b@example.org": Outcome(250, "ok")})])
    [(mid, status, extra, _, via)] = moves(plan)
    assert (status, via) == ("delivered", ("sent",)) and plan.bounces == []
    assert extra["accepted_recipients"] == ["a@example.org", "b@example.org"]
    assert extra["refused_recipients"] == ["c@example.org"]
    assert [e["event"] for e in plan.events] == ["email.sent", "email.delivered"]


def test_a_message_whose_only_accepted_recipient_came_earlier_is_still_delivered_when_the_rest_give_up():
    earlier = spent({**message(to=TRIO[:2], attempts=30), "accepted_recipients": ["a@example.org"]})
    plan = plan_outcomes([(earlier, {"b@example.org": Outcome(451, "later")})], lifetime_seconds=LIFETIME)
    [(_, status, extra, detail, _)] = moves(plan)
    assert status == "delivered" and extra["undelivered_recipients"] == ["b@example.org"]
    assert detail.startswith("gave up after") and extra["smtp_response"] == "250 accepted in an earlier attempt"


def test_nobody_accepted_and_the_rest_deferred_to_the_end_is_failed_with_the_bounces_kept():
    earlier = spent({**message(to=TRIO[1:], attempts=30), "refused_recipients": ["c@example.org"]})
    plan = plan_outcomes([(earlier, {"b@example.org": Outcome(451, "later")})], lifetime_seconds=LIFETIME)
    assert moves(plan)[0][1] == "failed" and moves(plan)[0][2]["refused_recipients"] == ["c@example.org"]


def test_a_synchronous_bounce_counts_as_a_send_and_a_bounce():
    plan = plan_outcomes([(message(), {"a@example.org": Outcome(550, "no")})])
    [counts] = plan.analytics.values()
    assert counts == {"sends": 1, "bounces": 1, "api_sends": 1}


def test_a_message_keeps_its_last_twenty_smtp_attempts_with_replies_cut_to_500_characters():
    earlier = [{"at": f"a{n}", "code": 451, "text": "later", "outcome": "deferred"} for n in range(20)]
    accepted = {"a@example.org": Outcome(250, "ok " + "x" * 900)}
    plan = plan_outcomes([({**message(), "smtp_attempts": earlier}, accepted)],
                         rendered_at={"m1": "2026-01-01T00:00:00.000000Z"})
    [moved] = plan.transitions
    kept = moved.fields["smtp_attempts"]
    assert len(kept) == 20 and kept[0]["at"] == "a1"
    assert kept[-1]["code"] == 250 and kept[-1]["outcome"] == "delivered" and len(kept[-1]["text"]) == 500
    assert kept[-1]["rendered_at"] == "2026-01-01T00:00:00.000000Z"


def test_a_bounce_keeps_the_refusal_as_its_attempt():
    plan = plan_outcomes([(message(), {"a@example.org": Outcome(550, "5.1.1 no such user")})])
    [moved] = plan.transitions
    [attempt] = moved.fields["smtp_attempts"]
    assert (attempt["code"], attempt["text"], attempt["outcome"]) == (550, "5.1.1 no such user", "bounced")
