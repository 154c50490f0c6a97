"""The send claim and the retry bookkeeping against the store: a job retried with its
token takes its own claim back, another job gets nothing; a retry waiting in the store is
promoted once and is not mistaken for a stalled message by the watchdog."""

from __future__ import annotations

from mongo import messages
from pipelines.clock import in_seconds, now_iso
from pipelines.ids import new_message_id


def queued(**fields) -> dict:
    at = now_iso()
    return {"_id": new_message_id(), "workspace_id": "ws", "to": ["a@example.org"], "subject": "Hi",
            "status": "queued", "attempts": 0, "created_at": at, "updated_at": at, "history": [], **fields}


def seed(db_thread, *docs):
    async def insert(db):
        await db.messages.insert_many(list(docs))
    db_thread.run(insert)


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
