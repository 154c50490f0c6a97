"""The backlog gauges' counts (mongo/operations.backlogs, served by the scheduler as
`postroom_backlog`): what is waiting now, by the integer fields each reader takes work by."""

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
