"""The send claim and the retry bookkeeping against the store: a job retried with its
token takes its own claim back, another job gets nothing; a retry waiting in the store is
promoted once and is not mistaken for a stalled message by the watchdog."""

from __future__ import annotations

from mongo import messages
from pipelines.core.clock import in_seconds, now_iso
from pipelines.core.ids import new_message_id
from pipelines.messages import delivery_status


def queued(**fields) -> dict:
    at = now_iso()
    return {"_id": new_message_id(), "workspace_id": "ws", "to": ["a@example.org"], "subject": "Hi",
            "status": "queued", "attempts": 0, "created_at": at, "updated_at": at, "history": [], **fields}


def seed(db_thread, *docs):
    """Stored as every message is (with its scheduler times: messages.watched)."""
    db_thread.run(messages.insert_many, list(docs))


def test_a_retried_job_takes_its_own_claim_back_and_no_other_job_can(private_db):
    first, second = queued(), queued()
    seed(private_db, first, second)
    ids = [first["_id"], second["_id"]]
    claimed = private_db.run(messages.claim_for_sending, ids, "job-token", 300)
    assert sorted(m["_id"] for m in claimed) == sorted(ids)
    # The claim was written, but its reader died with the store: the retried job (same token) …
    again = private_db.run(messages.claim_for_sending, ids, "job-token", 300)
    assert sorted(m["_id"] for m in again) == sorted(ids)
    # … while a duplicate of the job (another token) finds nothing to send.
    assert private_db.run(messages.claim_for_sending, ids, "other-token", 300) == []


def test_a_retry_waiting_in_the_store_is_promoted_once_when_due_and_is_not_stale_meanwhile(private_db):
    long_ago = in_seconds(-3600)
    waiting = queued(updated_at=long_ago, attempts=5, next_attempt_at=in_seconds(-1))
    later = queued(updated_at=long_ago, attempts=5, next_attempt_at=in_seconds(3600))
    stalled = queued(updated_at=long_ago)
    seed(private_db, waiting, later, stalled)

    stale = [d["_id"] for d in private_db.run(messages.stale_queued, 600, 100)]
    assert stalled["_id"] in stale and waiting["_id"] not in stale and later["_id"] not in stale
    due = [d["_id"] for d in private_db.run(messages.due_retries)]
    assert waiting["_id"] in due and later["_id"] not in due
    assert private_db.run(messages.take_due_retry, waiting["_id"], 5) is True
    assert private_db.run(messages.take_due_retry, waiting["_id"], 5) is False  # a second scheduler
    assert waiting["_id"] not in [d["_id"] for d in private_db.run(messages.due_retries)]


def test_only_the_claiming_job_hands_a_message_back_for_a_retry_and_that_counts_one_attempt(private_db):
    message = queued()
    seed(private_db, message)
    private_db.run(messages.claim_for_sending, [message["_id"]], "job-token", 300)
    assert private_db.run(messages.apply, [delivery_status.retry(message["_id"], "other-token", "451 later")]) == 0
    assert private_db.run(messages.apply, [delivery_status.retry(message["_id"], "job-token", "451 later",
                                                                 next_attempt_at="2099-01-01T00:00:00Z")]) == 1
    [doc] = private_db.run(messages.load, [message["_id"]])
    assert doc["status"] == "queued" and doc["attempts"] == 1 and doc["lease_token"] == ""
    assert doc["history"][-1]["status"] == "deferred"
    assert doc["history"][-1]["detail"] == "451 later; next attempt at 2099-01-01T00:00:00Z"


def test_a_scheduled_message_is_promoted_once_and_a_final_one_never_moves(private_db):
    due, gone = queued(status="scheduled", due_at=in_seconds(-1)), queued(status="cancelled")
    seed(private_db, due, gone)
    assert private_db.run(messages.apply, [delivery_status.promote(due["_id"])]) == 1
    assert private_db.run(messages.apply, [delivery_status.promote(due["_id"])]) == 0  # a second scheduler
    assert private_db.run(messages.apply, [delivery_status.fail(gone["_id"], "late")]) == 0
    docs = {d["_id"]: d for d in private_db.run(messages.load, [due["_id"], gone["_id"]])}
    assert docs[due["_id"]]["status"] == "queued" and docs[due["_id"]]["queued_at"]
    assert docs[gone["_id"]]["status"] == "cancelled"
