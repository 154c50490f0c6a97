"""The scheduler's watchdog: a message whose render or send job was lost is rendered and
sent again, exactly once. The lost jobs are simulated by writing the messages straight
into the store (no broker message at all), with timestamps from long ago."""

import uuid

from mongo import messages
from pipelines.core.clock import in_seconds
from pipelines.core.ids import new_message_id
from pipelines.templates.personalise import TEMPLATE_DATA_FIELD
from tests.support.barriers import mail_barrier, scheduler_passes
from tests.support.polling import wait_status

LONG_AGO_SECONDS = 3600  # older than the default POSTROOM_MESSAGE_STALL_SECONDS (600)
SENDER_FIELDS = ("workspace_id", "key_id", "sandbox", "kind", "from_address", "from_name", "reply_to",
                 "signing_domain", "custom_domain", "track_opens", "track_clicks", "template_id",
                 "template_version", TEMPLATE_DATA_FIELD, "batch_id", "campaign_id")


def sent_through_the_api(service, tenant) -> dict:
    """A message the normal path delivered, read back from the store: its sender fields
    are what this workspace's messages carry."""
    response = tenant.post("/email/send", json={"to": f"first-{uuid.uuid4().hex[:8]}@example.org",
                                                "subject": "First", "text": "x"})
    assert response.status_code == 202, response.text
    message_id = response.json()["data"]["message_id"]
    wait_status(tenant, message_id, "delivered")

    async def read(db):
        return await db.messages.find_one({"_id": message_id})
    return service.store.run(read)


def orphan(template: dict, to: str, **state) -> dict:
    """A message as the front stores it, but `state` (status, timestamps) from long ago."""
    long_ago = in_seconds(-LONG_AGO_SECONDS)
    return {**{k: template[k] for k in SENDER_FIELDS}, "_id": new_message_id(), "to": [to],
            "subject": "Lost and found", "html": None, "text": "found again", "attempts": 0,
            "queued_at": long_ago, "created_at": long_ago, "updated_at": long_ago,
            "history": [{"status": "queued", "at": long_ago}], **state}


def test_messages_whose_jobs_were_lost_are_delivered_exactly_once(service, tenant):
    template = sent_through_the_api(service, tenant)
    stale_to, lapsed_to = (f"{p}-{uuid.uuid4().hex[:8]}@example.org" for p in ("stale", "lapsed"))
    stale = orphan(template, stale_to, status="queued")
    # Claimed by a worker that died mid-send: its lease ran out a minute ago.
    lapsed = orphan(template, lapsed_to, status="sending", lease_token="dead-worker",
                    lease_until=in_seconds(-60))

    service.store.run(messages.insert_many, [stale, lapsed])  # stored as every message is

    stale_view = wait_status(tenant, stale["_id"], "delivered")
    lapsed_view = wait_status(tenant, lapsed["_id"], "delivered")
    assert [h["status"] for h in stale_view["history"]] == ["queued", "sent", "delivered"]
    assert [h["status"] for h in lapsed_view["history"]] == ["queued", "deferred", "sent", "delivered"]
    assert lapsed_view["history"][1]["detail"] == "send lease expired; sending again"
    scheduler_passes(service, 3)  # a watchdog that fired again would have sent again
    mail_barrier(service)  # and what such a pass published is queued ahead of the sentinel
    assert len(service.smtp.messages_to(stale_to)) == 1
    assert len(service.smtp.messages_to(lapsed_to)) == 1
    assert service.smtp.messages_to(stale_to)[0].body("plain").startswith("found again")
