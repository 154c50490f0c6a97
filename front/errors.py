"""The error envelope `{error: {code, message, path?}}`, registered once for every failure."""

from __future__ import annotations

import logging

from pymongo.errors import ConnectionFailure
from quart import Quart, jsonify
from werkzeug.exceptions import HTTPException

from pipelines.core.errors import UNAVAILABLE_RETRY_AFTER_SECONDS, PostroomError, RateLimited, ServiceUnavailable

log = logging.getLogger("postroom.front")

STORE_UNREACHABLE = "The service cannot reach its database. Retry after the Retry-After wait."

_HTTP_CODES = {
    400: "validation_error",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "validation_error",
    429: "rate_limited",
}


def code_for_status(status: int) -> str:
    """The envelope code for an HTTP status raised outside our own errors (werkzeug's):
    the mapped name, else the class of failure, so a client never sees a bare "error"."""
    return _HTTP_CODES.get(status) or ("internal_error" if status >= 500 else "validation_error")


def error_response(status: int, code: str, message: str, path: str | None = None, headers=None):
    error = {"code": code, "message": message}
    if path is not None:
        error["path"] = path
    response = jsonify({"error": error})
    response.status_code = status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def register(app: Quart) -> None:
    @app.errorhandler(PostroomError)
    async def _domain(error: PostroomError):
        headers = {}
        if isinstance(error, (RateLimited, ServiceUnavailable)):
            headers["Retry-After"] = str(error.retry_after)
        return error_response(error.status, error.code, error.message, error.path, headers)

    @app.errorhandler(ConnectionFailure)
    async def _store_unreachable(error: ConnectionFailure):
        # Unreachable, or stopped answering: an operational state, not a bug; one line, no trace.
        log.warning("store unreachable: %s", type(error).__name__)
        return error_response(503, "service_unavailable", STORE_UNREACHABLE,
                              headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER_SECONDS)})

    @app.errorhandler(HTTPException)
    async def _http(error: HTTPException):
        status = error.code or 500
        code = code_for_status(status)
        messages = {
            404: "No such endpoint.",
            405: "Method not allowed on this endpoint.",
            413: "Request body too large.",
        }
        message = messages.get(status) or (error.description or error.name)
        headers = {}
        if status == 405 and getattr(error, "valid_methods", None):
            headers["Allow"] = ", ".join(sorted(error.valid_methods))
        return error_response(status, code, message, None, headers)

    @app.errorhandler(Exception)
    async def _unexpected(error: Exception):
        log.exception("unexpected error")
        return error_response(500, "internal_error",
                              "Unexpected error; safe to retry with backoff.")
