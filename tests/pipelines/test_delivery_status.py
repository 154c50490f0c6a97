"""The delivery status of one message only moves forward (but for the claim's moves), as
its table says, and what the recipient's side reports (opens, clicks, late bounces) only
moves a message the send step has reached."""

from pathlib import Path

import pytest

from pipelines.messages.delivery_status import (
    ALL,
    EVENTS,
    FINAL,
    NEVER_MS,
    Refused,
    Transition,
    can_move,
    cancel,
    claim,
    claim_again,
    claim_lapsed,
    forward,
    give_up,
    hold,
    move,
    park,
    promote,
    retry,
    revive,
    sources_for,
    table_markdown,
    watch,
)


def test_statuses_only_move_forward_and_final_ones_stay():
    assert can_move("queued", "sending") and can_move("sent", "delivered") and can_move("delivered", "opened")
    assert not can_move("opened", "delivered") and not can_move("delivered", "delivered")
    assert can_move("delivered", "bounced") and not can_move("bounced", "opened")
    assert not can_move("cancelled", "queued")


def test_an_open_or_a_late_bounce_moves_only_a_message_that_was_sent():
    # a message still queued for another recipient's retry must stay claimable by the send step
    assert "queued" in sources_for("bounced") and "sending" in sources_for("bounced")  # the send step's bounce
    for new in ("opened", "clicked", "bounced"):
        sent_only = sources_for(new, once_sent=True)
        assert "queued" not in sent_only and "sending" not in sent_only and "scheduled" not in sent_only
        assert {"sent", "delivered"} <= set(sent_only)
    assert "opened" in sources_for("clicked", once_sent=True)


def test_every_transition_is_built_from_the_table():
    # `rendered` is no status: the render step writes nothing for a message that renders
    assert "rendered" not in ALL
    with pytest.raises(ValueError):
        Transition("m1", "defer", ("cancelled",))  # a final status is never left
    with pytest.raises(ValueError):
        Transition("m1", "defer", ("delivered",))  # nor does a sent message go back
    assert retry("m1", "t", "451 later").sources == ("sending",)
    # sending past its lease, or queued under a born claim whose job never ran
    assert revive("m1", lapsed_before=1_700_000_000_000).sources == ("queued", "sending")
    assert promote("m1").sources == ("scheduled",)
    assert set(forward("m1", "opened", once_sent=True).sources) == set(sources_for("opened", once_sent=True))
    assert cancel("m1", current="queued", detail="campaign cancelled").sources == ("queued",)


def test_a_retry_is_guarded_on_the_claim_and_counts_an_attempt_while_a_hold_does_not():
    again = retry("m1", "token", "451 later", next_attempt_at="2099-01-01T00:00:00Z")
    assert again.guard == {"lease_token": "token"} and again.inc == {"attempts": 1}
    assert again.entry == "deferred" and again.detail == "451 later; next attempt at 2099-01-01T00:00:00Z"
    held = hold("m1", "token")
    assert held.guard == {"lease_token": "token"} and held.inc == {} and held.entry is None
    lapsed = give_up("m1", "gave up", lapsed_before=1_700_000_000_000)
    # on the integer twin of lease_until: a date-like string in a filter makes the embedded store scan
    assert lapsed.sources == ("sending",)
    assert lapsed.guard == {"lease_ms": {"$lt": 1_700_000_000_000}, "lease_token": {"$ne": ""}}


def test_the_table_answers_each_event_in_each_status_or_refuses():
    assert move("queued", "claim") == "sending" and move("sending", "defer") == "queued"
    assert move("delivered", "report_bounce") == "bounced"
    for final in FINAL:  # nothing leaves a final status
        for event in EVENTS:
            with pytest.raises(Refused):
                move(final, event)
    with pytest.raises(Refused):
        move("queued", "open")  # an open moves only a message that was sent
    assert all(m.to in ALL and set(m.sources) <= ALL for m in EVENTS.values())


def test_the_claims_are_guarded_on_the_lease_token_or_its_lapse():
    assert claim("m1", "job", "2099-01-01T00:00:00Z").guard == {"lease_token": ""}
    assert claim("m1", "job", "2099-01-01T00:00:00Z", born="born-a").guard == {"lease_token": "born-a"}
    assert claim("m1", "job", "2099-01-01T00:00:00Z").sources == ("queued",)
    taken = claim_lapsed("m1", "job", "2099-01-01T00:00:00Z", before_ms=1_700_000_000_000)
    assert taken.sources == ("queued", "sending") and taken.guard == {"lease_ms": {"$lt": 1_700_000_000_000}}
    again = claim_again("m1", "job", "2099-01-01T00:00:00Z")
    assert again.sources == ("sending",) and again.guard == {"lease_token": "job"} and again.to == "sending"


def test_docs_show_the_table_as_it_is():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "email.md").read_text()
    assert table_markdown() in "\n".join(line.strip() for line in docs.splitlines())  # (indented in a list)


def test_a_paused_campaigns_message_is_parked_where_neither_watchdog_nor_due_pass_finds_it():
    parked = park("m1", current="sending", claim="tok")
    assert parked.to == "queued" and parked.sources == ("sending",) and parked.guard == {"lease_token": "tok"}
    assert parked.fields["lease_token"] == "" and parked.fields["parked"] is True and not parked.inc
    times = watch(parked.to, "2026-11-28T12:00:00.000Z", parked.fields)
    assert times["stall_ms"] == NEVER_MS  # not stale: the watchdog leaves it alone
    assert times["due_ms"] > 200_000_000_000_000  # year 9999: the due-retry pass never reaches it
