"""The backlog gauges' counts (mongo/operations.backlogs, served by the scheduler as
`postroom_backlog`): what is waiting now, by the integer fields each reader takes work by;
and the open automation runs (operations.open_automation_runs, `postroom_automation_runs`)."""

from __future__ import annotations

from mongo import operations, outbox
from pipelines.core.clock import now_ms
from pipelines.messages.delivery_status import NEVER_MS


def test_each_backlog_counts_what_waits_now_and_not_what_is_done_or_later(private_db):
    async def go(db):
        now = now_ms()
        await db.webhook_deliveries.insert_many(
            [{"_id": f"d{n}", "status": "pending", "due_ms": now - 1000 * n} for n in range(1, 4)]
            + [{"_id": "later", "status": "pending", "due_ms": now + 60_000},
               {"_id": "done", "status": "delivered", "due_ms": NEVER_MS}])
        await db.outbox.insert_many(
            [{"_id": "e1", outbox.DISPATCH_MS: now - 5, outbox.AUTOMATIONS_MS: now - 5},
             {"_id": "e2", outbox.DISPATCH_MS: now - 4, outbox.AUTOMATIONS_MS: NEVER_MS},
             {"_id": "e3", outbox.DISPATCH_MS: NEVER_MS, outbox.AUTOMATIONS_MS: NEVER_MS}])
        await db.automation_runs.insert_many([{"_id": "r1", "wake_ms": now - 10}, {"_id": "r2", "wake_ms": NEVER_MS}])
        return await operations.backlogs(db)
    assert private_db.run(go) == {"webhook_deliveries_due": 3, "outbox_for_webhooks": 2,
                                  "outbox_for_automations": 1, "automation_runs_due": 1}


def test_an_empty_store_has_no_backlog(private_db):
    assert set(private_db.run(operations.backlogs).values()) == {0}


def test_open_runs_are_the_active_ones_and_of_those_the_waiting_ones_not_paused_nor_ended(private_db):
    async def go(db):
        now = now_ms()
        await db.automation_runs.insert_many([
            {"_id": "ready", "status": "active", "phase": "ready", "wake_ms": now + 60_000},
            {"_id": "delay", "status": "active", "phase": "waiting", "wake_ms": now + 86_400_000},
            {"_id": "retry", "status": "active", "phase": "waiting", "wake_ms": now - 10},
            {"_id": "calling", "status": "active", "phase": "calling", "wake_ms": now + 30_000},
            # a paused run keeps its phase, and has no wake time until it resumes
            {"_id": "paused", "status": "paused", "phase": "waiting", "wake_ms": NEVER_MS},
            {"_id": "done", "status": "completed", "phase": "", "wake_ms": NEVER_MS}])
        return await operations.open_automation_runs(db)
    assert private_db.run(go) == {"active": 4, "waiting": 2}
