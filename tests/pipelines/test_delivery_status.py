"""The delivery status of one message only moves forward, and what the recipient's side
reports (opens, clicks, late bounces) only moves a message the send step has reached."""

from pipelines.delivery_status import can_move, sources_for


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
