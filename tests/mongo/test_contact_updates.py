"""Contact updates are compare-and-set on the stored document: concurrent patches merge
attributes without losing one another's, and the attribute cap holds on what is stored."""

from __future__ import annotations

import asyncio

from mongo import contacts
from pipelines.core.errors import ValidationFailed
from pipelines.workflows import update_contact

WORKSPACE = "ws-updates"


def patch(db, contact_id, **attributes):
    return update_contact.update(db, WORKSPACE, contact_id, fields={}, attributes=attributes, max_attributes=100)


def test_concurrent_patches_merge_and_cannot_pass_the_cap_together(private_db):
    """Ten patches at once, each adding its own attribute: every one is kept (the update is
    a compare-and-set on the integer version; on `updated_at` the embedded store let
    writes within one second overwrite each other), and at the cap both further ones are
    refused."""
    async def go(db):
        doc = contacts.new_document(WORKSPACE, email="full@example.org", attributes={f"a{i}": i for i in range(90)})
        assert await contacts.insert(db, doc)
        merged = await asyncio.gather(*(patch(db, doc["_id"], **{f"x{i}": i}) for i in range(10)))
        at_cap = await asyncio.gather(patch(db, doc["_id"], p=1), patch(db, doc["_id"], q=2),
                                      return_exceptions=True)
        return merged, at_cap, await contacts.get(db, WORKSPACE, doc["_id"])
    merged, at_cap, stored = private_db.run(go)
    assert {f"x{i}" for i in range(10)} <= set(stored["attributes"])  # no patch lost another's attribute
    assert stored["version"] == 10  # one write each
    refused = [r for r in at_cap if isinstance(r, ValidationFailed)]
    assert len(refused) == 2 and len(stored["attributes"]) == 100  # 90 + 10: both further patches refused
    assert refused[0].path == "attributes"


def test_one_of_two_racing_patches_at_the_last_free_slot_is_refused(private_db):
    async def go(db):
        doc = contacts.new_document(WORKSPACE, email="nearly@example.org", attributes={f"a{i}": i for i in range(99)})
        assert await contacts.insert(db, doc)
        results = await asyncio.gather(patch(db, doc["_id"], p=1), patch(db, doc["_id"], q=2),
                                       return_exceptions=True)
        return results, (await contacts.get(db, WORKSPACE, doc["_id"]))["attributes"]
    results, stored = private_db.run(go)
    assert sum(isinstance(r, ValidationFailed) for r in results) == 1 and len(stored) == 100
