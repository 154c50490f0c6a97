"""Helpers the campaign, tracking and recipient-page tests share."""

from __future__ import annotations

import uuid

from mongo import contacts as contact_store
from tests.support.audience import make_contact, make_list
from tests.support.polling import wait_until  # noqa: F401  (re-exported for the campaign tests)


def make_template(tenant, html="<html><body><p>Hi {{first_name|there}}</p></body></html>", name="Newsletter"):
    response = tenant.post("/templates", json={"name": name, "html": html})
    assert response.status_code == 201, response.text
    return response.json()["data"]


def make_campaign(tenant, *, template_id, list_id=None, segment_id=None, **fields):
    body = {"name": "Spring", "subject": "Hello {{first_name|friend}}", "template_id": template_id, **fields}
    if list_id:
        body["list_id"] = list_id
    if segment_id:
        body["segment_id"] = segment_id
    response = tenant.post("/campaigns", json=body)
    assert response.status_code == 201, response.text
    return response.json()["data"]


def list_with_contacts(tenant, emails, **contact_fields):
    members = make_list(tenant, f"list-{uuid.uuid4().hex[:6]}")
    contacts = [make_contact(tenant, email, list_id=members["id"], **contact_fields) for email in emails]
    return members, contacts


def campaign_to_stored(stack, tenant, list_id, addresses) -> dict:
    """A campaign (of a fresh template) to list `list_id`, its members `addresses` written
    straight into the store (thousands, faster than through the API)."""
    async def seed(db):
        await db.contacts.insert_many([contact_store.new_document(tenant.workspace_id, email=a, lists=[list_id])
                                       for a in addresses])
    stack.store.run(seed)
    return make_campaign(tenant, template_id=make_template(tenant)["id"], list_id=list_id)


def send(tenant, campaign_id, key=None):
    return tenant.post(f"/campaigns/{campaign_id}/send/api",
                       headers={"Idempotency-Key": key or uuid.uuid4().hex})


def wait_campaign(tenant, campaign_id, status, timeout=30.0):
    def reached():
        body = tenant.get(f"/campaigns/{campaign_id}").json()["data"]
        return body if body["status"] == status else None
    return wait_until(reached, timeout=timeout, what=f"campaign status {status}", interval=0.2)
