"""Inbound addresses, route patterns, the flood budget and the event's attachment budget
(pipelines/inbound_routes/): rules, no services."""

import pytest

from pipelines.inbound_routes import received_event
from pipelines.inbound_routes.addresses import first_match, matches, new_token, pattern_problem, recipient, token_of
from pipelines.inbound_routes.flood import WINDOW_SECONDS, FloodGate, sender_keys

DOMAIN = "inbound.example"


def test_tokens_are_random_16_character_base32_and_name_the_workspace_only_on_the_inbound_domain():
    tokens = {new_token() for _ in range(200)}
    assert len(tokens) == 200 and all(len(t) == 16 and t.isalnum() and t == t.lower() for t in tokens)
    token = tokens.pop()
    assert token_of(recipient(f"{token.upper()}+Ticket-42@Inbound.Example"), DOMAIN) == token
    assert token_of(recipient(f"{token}@elsewhere.example"), DOMAIN) is None
    assert token_of(recipient(f"{token[:-1]}@{DOMAIN}"), DOMAIN) is None
    assert token_of(recipient(f"{token[:-1]}1@{DOMAIN}"), DOMAIN) is None  # 1 is no base32 letter


def test_a_recipient_keeps_its_tag():
    found = recipient("<Abc+Ticket-42+x@Inbound.Example>")
    assert (found.local, found.tag, found.domain, found.base) == ("abc", "ticket-42+x", DOMAIN, f"abc@{DOMAIN}")
    assert recipient("no-at-sign") is None and recipient("+tag@x.example") is None


@pytest.mark.parametrize("pattern, address, taken", [
    ("*", "a+b@x.example", True),
    ("a@x.example", "a@x.example", True),
    ("a@x.example", "A+42@X.example", True),       # an exact address takes its tagged forms
    ("a+42@x.example", "a+43@x.example", False),   # a tagged pattern takes that tag only
    ("a+ticket-*@x.example", "a+ticket-42@x.example", True),
    ("a+ticket-*@x.example", "a@x.example", False),
    ("*@support.x.example", "anyone@support.x.example", True),
    ("*@support.x.example", "anyone@x.example", False),
    ("a.b@x.example", "aXb@x.example", False),     # `.` is literal, not a regex
])
def test_patterns(pattern, address, taken):
    assert matches(pattern, recipient(address)) is taken


@pytest.mark.parametrize("pattern", ["a b@x.example", "<a@x.example>", "a@x.example\r\nBcc: b@y.example",
                                     "nobody", "a@", "@x.example", 'a"@x.example', "a@x_y.example"])
def test_patterns_that_are_not_addresses_are_refused(pattern):
    assert pattern_problem(pattern)


def test_the_first_route_by_priority_then_age_takes_the_message():
    routes = [{"_id": "c", "pattern": "*", "priority": 100, "created_at": "2026-01-01T00:00:00Z"},
              {"_id": "b", "pattern": "a@x.example", "priority": 100, "created_at": "2026-01-02T00:00:00Z"},
              {"_id": "a", "pattern": "a+*@x.example", "priority": 5, "created_at": "2026-01-03T00:00:00Z"}]
    assert first_match(routes, recipient("a+1@x.example"))["_id"] == "a"
    assert first_match(routes, recipient("a@x.example"))["_id"] == "c"
    assert first_match(routes[1:], recipient("z@x.example")) is None


def test_the_flood_gate_refuses_past_the_budget_until_the_window_moves_on():
    gate, keys = FloodGate(per_minute=2), sender_keys("192.0.2.1", "Flood@Example.com")
    assert keys == ["ip:192.0.2.1", "from:flood@example.com"]
    for at in (0.0, 1.0):
        assert gate.wait_seconds(keys, at) == 0
        gate.count(keys, at)
    assert gate.wait_seconds(keys, 2.0) == 58
    assert gate.wait_seconds(sender_keys("192.0.2.2", "other@example.com"), 2.0) == 0
    assert gate.wait_seconds(sender_keys("192.0.2.9", "flood@example.com"), 2.0) == 58  # same MAIL FROM
    assert gate.wait_seconds(keys, WINDOW_SECONDS + 0.5) == 0
    assert FloodGate(per_minute=0).wait_seconds(keys, 0.0) == 0  # 0: no budget


def test_attachments_travel_in_the_event_while_its_budget_lasts():
    big = "A" * (received_event.EVENT_ATTACHMENT_BYTES // 2 + 1)
    shown = received_event.event_attachments([{"filename": n, "content_b64": big} for n in "abc"]
                                             + [{"filename": "d"}])
    assert ["content_b64" in a for a in shown] == [True, False, False, False]
    assert [a.get("content_omitted") for a in shown] == [None, True, True, True]
    kept = received_event.stored_parse({"attachments": [{"filename": "a", "content_b64": "QQ=="}], "subject": "s"})
    assert kept == {"attachments": [{"filename": "a"}], "subject": "s"}


def test_bodies_past_their_budget_are_left_out_of_event_and_store():
    small = {"text": "hi", "html": None, "headers": [["Subject", "x"]], "attachments": []}
    assert received_event.bounded(small) is small
    huge = {**small, "html": "x" * received_event.BODY_CHARACTERS}
    cut = received_event.bounded(huge)
    assert cut["bodies_omitted"] is True and cut["html"] is None and cut["text"] is None and cut["headers"] == []
