"""Assertions on API answers shared by the HTTP tests."""


def assert_error(response, status: int, code: str, path: str | None = None) -> dict:
    """The response is the error envelope with this status and code (and `path`, when given);
    returns the `error` object for further checks."""
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code, body
    if path is not None:
        assert body.get("path") == path, body
    return body
