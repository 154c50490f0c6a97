"""The delivery status of one message only moves forward, and what the recipient's side
reports (opens, clicks, late bounces) only moves a message the send step has reached."""

import pytest

from pipelines.messages.delivery_status import (
    ALL,
    Transition,
    can_move,
    cancel,
    forward,
    give_up,
    hold,
    promote,
    retry,
    revive,
    sources_for,
)


def test_statuses_only_move_forward_and_final_ones_stay():
    assert can_move("queued", "sending") and can_move("sent", "delivered") and can_move("delivered", "opened")
    assert not can_move("opened", "delivered") and not can_move("delivered", "delivered")
    assert can_move("delivered", "bounced") and not can_move("bounced", "opened")
    assert not can_move("cancelled", "queued")


def test_an_open_or_a_late_bounce_moves_only_a_message_that_was_sent():
    # a message still queued for another recipient's retry must stay claimable by the send step
    for new in ("opened", "clicked", "bounced"):
        assert "queued" in sources_for(new) and "sending" in sources_for(new)
        sent_only = sources_for(new, once_sent=True)
        assert "queued" not in sent_only and "sending" not in sent_only and "scheduled" not in sent_only
        assert {"sent", "delivered"} <= set(sent_only)
    assert "opened" in sources_for("clicked", once_sent=True)


def test_every_transition_is_built_from_the_table():
    # `rendered` is no status: the render step writes nothing for a message that renders
    assert "rendered" not in ALL
    with pytest.raises(ValueError):
        Transition("m1", "queued", ("cancelled",))  # a final status is never left
    with pytest.raises(ValueError):
        Transition("m1", "queued", ("delivered",))  # nor does a sent message go back
    assert retry("m1", "t", "451 later").sources == ("sending",)
    assert revive("m1", lapsed_before=1_700_000_000_000).sources == ("sending",)
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
    assert lapsed.sources == ("sending",) and lapsed.guard == {"lease_ms": {"$lt": 1_700_000_000_000}}
