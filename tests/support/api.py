"""Assertions on API answers shared by the HTTP tests, and the small helpers they share."""

import uuid


def assert_error(response, status: int, code: str, path: str | None = None, *, no_path: bool = False) -> dict:
    """The response is the error envelope `{error: {code, message, path?}}` as JSON, with
    this status and code, a message, and `path` when given (none at all with `no_path`);
    returns the `error` object for further checks."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json"), response.headers
    assert "Traceback" not in response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == code, error
    assert isinstance(error.get("message"), str) and error["message"], error
    assert set(error) <= {"code", "message", "path"}, error
    if path is not None:
        assert error.get("path") == path, error
    if no_path:
        assert "path" not in error, error
    return error


def month_used(service, tenant) -> int:
    """The emails counted against the tenant's plan this month, as the store holds them."""
    from mongo.send_limits import plan_used
    from pipelines.core.clock import utcnow
    from pipelines.messages.throttle import month_of
    return service.store.run(lambda db: plan_used(db, tenant.workspace_id, month_of(utcnow())))


def unique_address(tag: str = "r") -> str:
    """An address no other test sends to."""
    return f"{tag}-{uuid.uuid4().hex[:8]}@example.org"


def stored_message(service, message_id: str) -> dict | None:
    """The message document as the store holds it."""
    async def get(db):
        return await db.messages.find_one({"_id": message_id})
    return service.store.run(get)
