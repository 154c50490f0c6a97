"""The render step's second suppression check knows the two streams: an address that
unsubscribed since a message was accepted still gets its transactional mail (a password
reset scheduled before), not marketing mail; a hard bounce holds back both."""

from __future__ import annotations

import uuid

from mongo import messages, suppressions
from pipelines.core.clock import now_iso
from pipelines.workflows.render_chunk import withhold_suppressed

WORKSPACE = "ws-streams"


def queued(to: str, **fields) -> dict:
    now = now_iso()
    return {"_id": f"msg_{uuid.uuid4().hex}", "workspace_id": WORKSPACE, "kind": "transactional", "to": [to],
            "status": "queued", "batch_id": None, "created_at": now, "updated_at": now,
            "history": [{"status": "queued", "at": now}], **fields}


def test_an_unsubscribe_since_acceptance_holds_back_marketing_mail_only(private_db):
    left, bounced = "left@streams.example", "gone@streams.example"
    docs = {"reset": queued(left), "newsletter": queued(left, stream="marketing"),
            "campaign": queued(left, kind="campaign", campaign_id="c1"),
            "reset_to_bounced": queued(bounced), "news_to_bounced": queued(bounced, stream="marketing")}

    async def go(db):
        await messages.insert_many(db, list(docs.values()))
        await suppressions.add(db, WORKSPACE, left, "unsubscribe", source="unsubscribe_page")
        await suppressions.add(db, WORKSPACE, bounced, "hard_bounce", source="dsn")
        kept = await withhold_suppressed(db, list(docs.values()))
        return {d["_id"] for d in kept}, {d["_id"]: d["status"] for d in await messages.load(db, [
            d["_id"] for d in docs.values()])}
    kept, status = private_db.run(go)
    assert kept == {docs["reset"]["_id"]}
    assert status[docs["reset"]["_id"]] == "queued"
    for name in ("newsletter", "campaign", "reset_to_bounced", "news_to_bounced"):
        assert status[docs[name]["_id"]] == "suppressed", name


def test_the_reasons_of_suppressed_addresses_are_read_in_one_go(private_db):
    async def go(db):
        await suppressions.add(db, WORKSPACE, "One@Streams.example", "unsubscribe")
        await suppressions.add(db, WORKSPACE, "two@streams.example", "complaint")
        return (await suppressions.reasons_among(db, WORKSPACE, ["one@streams.example", "two@streams.example",
                                                                  "three@streams.example"]),
                await suppressions.suppressed_among(db, WORKSPACE, ["one@streams.example", "two@streams.example"],
                                                    stream="transactional"))
    reasons, transactional = private_db.run(go)
    assert reasons == {"one@streams.example": "unsubscribe", "two@streams.example": "complaint"}
    assert transactional == {"two@streams.example"}
