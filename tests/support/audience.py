"""Small helpers the audience tests share: create things over HTTP, read the outbox."""

from __future__ import annotations


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


def error(response, status, code, path=None):
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code, body
    if path is not None:
        assert body.get("path") == path, body
    return body
