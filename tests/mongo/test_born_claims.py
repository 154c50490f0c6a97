"""Born claims (pipelines.messages.delivery_status.born_claim) against the store: a message stored
already claimed by the render job published for it is sent by that job with no claim
write, and by no other job until the claim's lease is over; what the job records is
guarded on that claim; a cancel leaves it to the job; the watchdog leaves it alone while
its lease lasts."""

from __future__ import annotations

import time

from mongo import campaigns, messages
from pipelines.core.clock import in_seconds, ms_of, now_iso
from pipelines.core.ids import new_message_id
from pipelines.core.settings import Settings
from pipelines.messages import delivery_status
from pipelines.workflows.send_chunk import claim_messages

SETTINGS = Settings()  # a 300 s lease


def born(token: str, lease_seconds: float = 300, **fields) -> dict:
    at = now_iso()
    return {"_id": new_message_id(), "workspace_id": "ws", "to": ["a@example.org"], "subject": "Hi",
            "status": "queued", "attempts": 0, "created_at": at, "updated_at": at, "history": [],
            **delivery_status.born_claim(token, in_seconds(lease_seconds)), **fields}


def seed(db_thread, *docs):
    db_thread.run(messages.insert_many, list(docs))


def stored(db_thread, *docs) -> dict[str, dict]:
    return {d["_id"]: d for d in db_thread.run(messages.load, [d["_id"] for d in docs])}


def test_the_job_of_a_born_claim_holds_it_as_stored_and_no_other_job_can_take_it(private_db):
    mine, other = born("born-a", lease_seconds=200), born("born-b")
    seed(private_db, mine, other)
    claim = private_db.run(claim_messages, SETTINGS, [mine["_id"], other["_id"]], "job-1", born=["born-a"])
    # held as stored (still queued, no write), the other job's message not at all
    assert [(m["_id"], m["status"], m["lease_token"]) for m in claim.messages] == [(mine["_id"], "queued", "born-a")]
    assert stored(private_db, mine)[mine["_id"]]["status"] == "queued"
    # a job without that born claim (a fan-out run again, a revival) claims nothing while it lasts
    assert private_db.run(messages.claim_for_sending, [mine["_id"], other["_id"]], "job-2", 300) == []
    # the job's lease is what is left of the born claim's (200 s), not a fresh one (300 s)
    assert claim.lease_end < time.monotonic() + 201


def test_what_the_holder_records_is_guarded_on_the_born_claim(private_db):
    message = born("born-a")
    seed(private_db, message)
    held = messages.Held({message["_id"]: ("queued", "born-a")}, {message["_id"]: []})
    wrong = messages.Held({message["_id"]: ("queued", "born-x")}, {message["_id"]: []})
    delivered = delivery_status.forward(message["_id"], "delivered", {"smtp_response": "250 ok"}, via=("sent",))
    # someone who does not hold it moves nothing in the held pass; the general move still
    # applies an outcome, as for any message (a late DSN): so check the held pass alone
    assert private_db.run(messages.apply, [delivery_status.hold(message["_id"], "born-x", current="queued")],
                          held=wrong) == 0
    assert private_db.run(messages.apply, [delivered], held=held) == 1
    doc = stored(private_db, message)[message["_id"]]
    assert doc["status"] == "delivered" and [e["status"] for e in doc["history"]] == ["sent", "delivered"]
    assert doc["sent_at"] and doc["delivered_at"]


def test_a_held_back_or_retried_born_message_is_queued_and_unclaimed_again(private_db):
    held_back, retried = born("born-a"), born("born-a")
    seed(private_db, held_back, retried)
    held = messages.Held.of(private_db.run(messages.load, [held_back["_id"], retried["_id"]]))
    assert private_db.run(messages.apply, [delivery_status.hold(held_back["_id"], "born-a", current="queued")],
                          held=held) == 1
    assert private_db.run(messages.apply, [delivery_status.retry(retried["_id"], "born-a", "451 later",
                                                                 current="queued")], held=held) == 1
    docs = stored(private_db, held_back, retried)
    assert docs[held_back["_id"]]["lease_token"] == "" and docs[held_back["_id"]]["attempts"] == 0
    assert docs[retried["_id"]]["lease_token"] == "" and docs[retried["_id"]]["attempts"] == 1
    # unclaimed again: any job may claim them now
    claimed = private_db.run(messages.claim_for_sending, [held_back["_id"], retried["_id"]], "job-2", 300)
    assert sorted(m["_id"] for m in claimed) == sorted([held_back["_id"], retried["_id"]])


def test_a_born_claim_with_less_than_half_its_lease_left_becomes_the_jobs_claim(private_db):
    late = born("born-a", lease_seconds=60)  # a job that waited in the broker: 60 of 300 s left
    seed(private_db, late)
    claim = private_db.run(claim_messages, SETTINGS, [late["_id"]], "job-1", born=["born-a"])
    [doc] = claim.messages
    assert doc["status"] == "sending" and doc["lease_token"] == "job-1"
    assert ms_of(doc["lease_until"]) > ms_of(in_seconds(250))  # a fresh lease


def test_a_lapsed_born_claim_is_anyones_and_the_watchdog_waits_for_its_end(private_db):
    lapsed, live = born("born-a", lease_seconds=-5), born("born-b", updated_at=in_seconds(-3600))
    seed(private_db, lapsed, live)
    # stored long ago but born claimed for 300 s more: not stale before its lease ends
    assert live["_id"] not in [d["_id"] for d in private_db.run(messages.stale_queued, 600, 100)]
    claimed = private_db.run(messages.claim_for_sending, [lapsed["_id"], live["_id"]], "job-2", 300)
    assert [m["_id"] for m in claimed] == [lapsed["_id"]]


def test_a_cancel_leaves_a_born_claim_to_its_job_which_cancels_it(private_db):
    campaign = {"_id": "cmp_born", "workspace_id": "ws", "status": "cancelled"}
    private_db.run(campaigns.insert, campaign)
    in_job, unclaimed = born("born-a", campaign_id="cmp_born"), born("", campaign_id="cmp_born")
    seed(private_db, in_job, unclaimed)
    assert private_db.run(campaigns.cancel_unsent, "cmp_born") == 1  # the unclaimed one only
    docs = stored(private_db, in_job, unclaimed)
    assert docs[unclaimed["_id"]]["status"] == "cancelled" and docs[in_job["_id"]]["status"] == "queued"
    claim = private_db.run(claim_messages, SETTINGS, [in_job["_id"]], "job-1", born=["born-a"])
    assert claim.messages == []
    assert stored(private_db, in_job)[in_job["_id"]]["status"] == "cancelled"


def test_a_cancel_takes_mail_held_for_a_delayed_send_job_not_due_yet_but_not_one_that_may_be_running(private_db):
    """Born claimed by a send job published with a delay (a throttle hold, a deferral):
    before the job is due nothing can be sending it, so the cancel does not wait for it."""
    from pipelines.core.clock import now_ms
    campaign = {"_id": "cmp_delayed", "workspace_id": "ws", "status": "cancelled"}
    private_db.run(campaigns.insert, campaign)
    later = born("", campaign_id="cmp_delayed", **delivery_status.born_claim(
        "send-later", in_seconds(360), job_due_ms=now_ms() + 60_000))
    due_now = born("", campaign_id="cmp_delayed", **delivery_status.born_claim(
        "send-now", in_seconds(300), job_due_ms=now_ms()))
    seed(private_db, later, due_now)
    assert private_db.run(campaigns.cancel_unsent, "cmp_delayed") == 1
    docs = stored(private_db, later, due_now)
    assert docs[later["_id"]]["status"] == "cancelled" and docs[due_now["_id"]]["status"] == "queued"
    # the delayed job, when it runs, finds nothing of its own to send
    assert private_db.run(claim_messages, SETTINGS, [later["_id"]], "job-1", born=["send-later"]).messages == []


def test_a_message_held_whole_is_written_whole_under_its_claim_and_not_once_the_claim_is_gone(private_db):
    kept, revived = born("born-a", template_data={"name": "Ada"}), born("born-a")
    seed(private_db, kept, revived)
    held = messages.Held.of(private_db.run(messages.load, [kept["_id"], revived["_id"]]), whole=True)
    # the watchdog takes the second away meanwhile (a lapsed lease): its claim token changes
    private_db.run(messages.requeue, [revived["_id"]], [])
    outcomes = [delivery_status.forward(m["_id"], "delivered", {"smtp_response": "250 ok",
                                                               "accepted_recipients": ["a@example.org"]},
                                        via=("sent",), current="queued") for m in (kept, revived)]
    assert private_db.run(messages.apply, outcomes[:1], held=held) == 1
    doc = stored(private_db, kept)[kept["_id"]]
    assert (doc["status"], doc["smtp_response"], doc["accepted_recipients"]) == ("delivered", "250 ok",
                                                                                ["a@example.org"])
    # what the write did not change is as it was, the history carried on, the times moved
    assert doc["template_data"] == {"name": "Ada"} and doc["subject"] == "Hi"
    assert [e["status"] for e in doc["history"]] == ["sent", "delivered"] and doc["sent_at"] == doc["delivered_at"]
    assert doc["stall_ms"] == doc["due_ms"] == delivery_status.NEVER_MS
    # the revived one is no longer held by this claim: the held pass writes nothing of it
    # (its revival stays: revivals counted, unclaimed)
    before = stored(private_db, revived)[revived["_id"]]
    private_db.run(messages.apply, [delivery_status.hold(revived["_id"], "born-a", current="queued")], held=held)
    after = stored(private_db, revived)[revived["_id"]]
    assert after == before and after["revivals"] == 1 and after["lease_token"] == ""


class RenderRequests:
    """Stands in for the broker at the workflow's publisher boundary: what the watchdog
    asked to render."""
    def __init__(self):
        self.rendered: list[str] = []

    async def render(self, message_ids, **_):
        self.rendered += list(message_ids)


def test_mail_handed_back_for_a_later_send_job_is_born_claimed_by_it_and_revived_when_that_lease_ends(private_db):
    """A job puts messages back to `queued` for a new send job (a throttle hold, an SMTP
    deferral riding the broker), then publishes that job. Killed in between, the job is never
    published: the messages, born claimed by it, are the watchdog's once its lease ends
    (here already over), not POSTROOM_MESSAGE_STALL_SECONDS later; while the lease lasts
    nobody else takes them, and a retry waiting in the store is not among them."""
    from pipelines.workflows import message_watchdog

    held_back, deferred, waiting, live = (born("job-a") for _ in range(4))
    seed(private_db, held_back, deferred, waiting, live)
    held = messages.Held.of(private_db.run(messages.load, [m["_id"] for m in (held_back, deferred, waiting, live)]))
    lost = delivery_status.born_claim("send-job-never-published", in_seconds(-1))
    coming = delivery_status.born_claim("send-job-published", in_seconds(300))
    private_db.run(messages.apply, [
        delivery_status.hold(held_back["_id"], "job-a", current="queued", handed_to=lost),
        delivery_status.retry(deferred["_id"], "job-a", "451 later", current="queued", handed_to=lost),
        delivery_status.retry(waiting["_id"], "job-a", "451 later", current="queued",
                              next_attempt_at=in_seconds(-1), handed_to=lost),  # waits in the store instead
        delivery_status.hold(live["_id"], "job-a", current="queued", handed_to=coming),
    ], held=held)
    docs = stored(private_db, held_back, deferred, waiting, live)
    assert [docs[m["_id"]]["lease_token"] for m in (held_back, deferred, waiting, live)] == [
        "send-job-never-published", "send-job-never-published", "", "send-job-published"]
    # the job it was handed to holds it: nobody else claims it while that lease lasts
    assert private_db.run(messages.claim_for_sending, [live["_id"]], "job-b", 300) == []
    # the due retry is the scheduler's promotion, not the watchdog's; the lapsed born claims the reverse
    assert [d["_id"] for d in private_db.run(messages.due_retries)] == [waiting["_id"]]
    asked = RenderRequests()
    assert private_db.run(message_watchdog.requeue_stalled_messages, SETTINGS, asked) == 2
    assert sorted(asked.rendered) == sorted([held_back["_id"], deferred["_id"]])
    docs = stored(private_db, held_back, deferred, live)
    for m in (held_back, deferred):
        assert docs[m["_id"]]["status"] == "queued" and docs[m["_id"]]["lease_token"] == ""
        assert docs[m["_id"]]["revivals"] == 1
    assert docs[live["_id"]]["lease_token"] == "send-job-published"
    # handed back once: a second pass finds nothing more (the revived ones wait for their render)
    assert private_db.run(message_watchdog.requeue_stalled_messages, SETTINGS, asked) == 0
