"""Received inbound messages in the store (mongo/inbound_messages.py): raw bytes in chunks
and back, a lost job's message handed out again and, after MAX_REQUEUES, `failed` and
kept; processing marks a message once."""

from mongo import inbound_messages
from pipelines.core.clock import now_ms

MIB = 1024 * 1024


def message(message_id: str, received_ms: int) -> dict:
    return {"_id": message_id, "workspace_id": "ws-1", "recipient": "t@inbound.example", "recipient_key":
            "t@inbound.example", "tag": "", "status": "received", "received_ms": received_ms, "requeues": 0}


def test_a_large_raw_message_is_stored_in_chunks_and_read_back_whole(private_db):
    raw = bytes(range(256)) * (2 * MIB // 256) + b"tail"
    private_db.run(inbound_messages.store, [message("m-1", now_ms())], raw)
    stored = private_db.run(inbound_messages.load, "m-1")
    assert stored["raw_chunks"] == 3
    assert private_db.run(inbound_messages.raw, stored) == raw


def test_a_message_whose_job_was_lost_is_handed_out_again_then_fails_and_is_kept(private_db):
    private_db.run(inbound_messages.store, [message("m-old", now_ms() - 600_000), message("m-new", now_ms())], b"x")
    for _ in range(inbound_messages.MAX_REQUEUES):
        assert private_db.run(inbound_messages.stale_received, 120) == (["m-old"], [])
    assert private_db.run(inbound_messages.stale_received, 120) == ([], ["m-old"])
    assert private_db.run(inbound_messages.load, "m-old")["status"] == "failed"
    assert private_db.run(inbound_messages.stale_received, 120) == ([], [])
    assert private_db.run(inbound_messages.load, "m-new")["status"] == "received"


def test_processing_marks_a_message_once(private_db):
    private_db.run(inbound_messages.store, [message("m-2", now_ms())], b"x")
    assert private_db.run(inbound_messages.finish, "m-2", {"subject": "first"}) is True
    assert private_db.run(inbound_messages.finish, "m-2", {"subject": "second"}) is False
    assert private_db.run(inbound_messages.load, "m-2")["subject"] == "first"
