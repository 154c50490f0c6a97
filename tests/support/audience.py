"""Small helpers the audience tests share: create things over HTTP, read the outbox."""

from __future__ import annotations

from tests.support.api import assert_error as error  # noqa: F401  (the audience tests import it from here)


def make_contact(tenant, email, **fields):
    response = tenant.post("/contacts", json={"email": email, **fields})
    assert response.status_code == 201, response.text
    return response.json()["data"]


def make_list(tenant, name="List", **fields):
    response = tenant.post("/lists", json={"name": name, **fields})
    assert response.status_code == 201, response.text
    return response.json()["data"]


def make_tag(tenant, name, **fields):
    response = tenant.post("/tags", json={"name": name, **fields})
    assert response.status_code == 201, response.text
    return response.json()["data"]


def events(service, tenant, event=None):
    """The outbox events of the tenant's workspace (optionally of one type), oldest first."""
    async def read(db):
        query = {"workspace_id": tenant.workspace_id}
        if event:
            query["event"] = event
        return await db.outbox.find(query, sort=[("timestamp", 1)]).to_list()
    return service.store.run(read)
