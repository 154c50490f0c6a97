"""Small helpers the audience tests share: create things over HTTP, read the outbox."""

from __future__ import annotations

from tests.support.api import assert_error


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


def assert_unknown_everywhere(tenant, resource: str, members: str, contact_id: str) -> None:
    """Every route of a list or tag (`resource`, and its `members` sub-path) answers 404
    not_found for an id that is unknown or another workspace's."""
    body = {"contact_ids": [contact_id]}
    for method, path, json in (("GET", resource, None), ("PATCH", resource, {"name": "x"}), ("GET", members, None),
                               ("POST", members, body), ("DELETE", members, body), ("DELETE", resource, None)):
        assert_error(tenant.client.request(method, path, json=json), 404, "not_found")
