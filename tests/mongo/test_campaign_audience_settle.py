"""The first fan-out job resolves the audience that send/api only counted: the campaign
keeps one resolution, and the plan charged for the count is settled to the real size once."""

from __future__ import annotations

import uuid

from mongo import contacts, send_limits, suppressions
from pipelines.core.clock import in_seconds, now_iso, parse_iso
from pipelines.core.settings import Settings
from pipelines.messages import throttle
from pipelines.workflows import fan_out_campaign


class RecordingPublisher:
    def __init__(self):
        self.parts: list[str] = []
        self.fanned: list[tuple[str, int]] = []

    async def render_parts(self, part_ids, *, token):
        self.parts.extend(part_ids)

    async def fan_out(self, campaign_id, batch):
        self.fanned.append((campaign_id, batch))


def seed(db_thread, counted: int) -> tuple[dict, str]:
    workspace_id, list_id = f"ws_{uuid.uuid4().hex[:8]}", f"lst_{uuid.uuid4().hex[:8]}"
    # a moment after the contacts below are created: the audience is who existed when it started
    started_at = in_seconds(5)
    campaign = {
        "_id": f"cmp_{uuid.uuid4().hex[:8]}", "workspace_id": workspace_id, "name": "Spring", "subject": "Hi",
        "template_id": "tpl_1", "template_version": 1, "key_id": "key_1", "sandbox": False,
        "track_opens": True, "track_clicks": True, "list_id": list_id, "segment_id": None,
        "sender": {"from_address": "news@acme.example", "from_name": "Acme", "reply_to": None,
                   "signing_domain": "acme.example", "custom_domain": True},
        "status": "sending", "started_at": started_at, "audience_at": started_at,
        "audience": {"_id": list_id, "conditions": None, "is_list": True}, "audience_resolved": False,
        "recipients_token": None, "total_recipients": counted, "batches_queued": 1, "batches_done": 0,
        "messages_created": 0, "fanout_done": False, "fanout_at": started_at}

    async def go(db):
        await db.contacts.insert_many([contacts.new_document(workspace_id, email=f"r{i}@settle.example",
                                                             lists=[list_id]) for i in range(3)])
        await suppressions.add(db, workspace_id, "r2@settle.example", "unsubscribe")
        await db.campaigns.insert_one(dict(campaign))
        assert await send_limits.charge_plan(db, workspace_id, month_of(campaign), counted, 0)
    db_thread.run(go)
    return campaign, workspace_id


def month_of(campaign: dict) -> str:
    return throttle.month_of(parse_iso(campaign["started_at"]))


def test_the_first_fan_out_job_resolves_the_audience_and_gives_back_what_the_count_overcharged(private_db):
    campaign, workspace_id = seed(private_db, counted=3)  # counted before r2 was suppressed
    publisher = RecordingPublisher()
    private_db.run(fan_out_campaign.fan_out, Settings(), publisher, campaign["_id"], 0)
    stored = private_db.run(lambda db: db.campaigns.find_one({"_id": campaign["_id"]}))
    assert stored["total_recipients"] == 2 and stored["batches_queued"] == 1 and stored["fanout_done"]
    handed_on = private_db.run(lambda db: db.campaign_parts.find({"campaign_id": campaign["_id"]}).to_list())
    assert publisher.parts == [p["_id"] for p in handed_on] and publisher.fanned == []
    assert sum(len(p["contact_ids"]) for p in handed_on) == 2
    assert private_db.run(send_limits.plan_used, workspace_id, month_of(campaign)) == 2

    # a second job that resolved alongside (a re-enqueued one) keeps nothing and settles nothing
    again = private_db.run(fan_out_campaign.resolve_audience, campaign)
    assert again["recipients_token"] == stored["recipients_token"]
    private_db.run(fan_out_campaign.fan_out, Settings(), publisher, campaign["_id"], 0)
    assert publisher.parts == [p["_id"] for p in handed_on]
    assert private_db.run(send_limits.plan_used, workspace_id, month_of(campaign)) == 2
    kept = private_db.run(lambda db: db.campaign_recipients.find({"campaign_id": campaign["_id"]}).to_list())
    assert len(kept) == 1


def test_a_resolution_larger_than_the_count_is_charged_the_difference(private_db):
    campaign, workspace_id = seed(private_db, counted=1)
    private_db.run(fan_out_campaign.fan_out, Settings(), RecordingPublisher(), campaign["_id"], 0)
    assert private_db.run(send_limits.plan_used, workspace_id, month_of(campaign)) == 2


def test_the_audience_is_read_in_id_ranges_and_every_contact_falls_in_one(private_db):
    """Contacts whose ids are not uuids (imported with ids of their own, any first
    character) are found too, each once, and a suppressed address is left out."""
    from mongo import campaign_audience
    workspace_id, list_id = f"ws_{uuid.uuid4().hex[:8]}", f"lst_{uuid.uuid4().hex[:8]}"
    ids = [str(uuid.uuid4()) for _ in range(40)] + ["0", "9zz", ":colon", "ABC", "_under", "f~", "g", "zz", "~last",
                                                     "-dash", "Ünï"]

    async def go(db):
        await db.contacts.insert_many([{**contacts.new_document(workspace_id, email=f"r{n}@example.org",
                                                                lists=[list_id]), "_id": cid}
                                       for n, cid in enumerate(ids)])
        await suppressions.add(db, workspace_id, "r3@example.org", reason="manual")
        audience = campaign_audience.audience_filter({"_id": list_id}, True, now_iso())
        return await campaign_audience.resolve_recipients(db, workspace_id, audience)
    resolved = private_db.run(go)
    assert resolved == sorted(cid for n, cid in enumerate(ids) if n != 3)
