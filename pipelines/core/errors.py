"""Every failure a client can see, with its code and HTTP status from the API spec §7.

    PostroomError
    ├── ValidationFailed        400 validation_error (with path)
    │   └── InvalidAnswers      … and every wrong field of a form submission
    ├── ConfirmationRequired    400 confirmation_required
    ├── MissingFromEmail        400 missing_from_email
    ├── NoContent               400 no_content
    ├── InvalidSchedule         400 invalid_schedule
    ├── Unauthorized            401 unauthorized
    ├── Forbidden               403 forbidden / domain_invalid / limit_reached
    ├── NotFound                404 not_found / template_not_found / contact_not_found / workspace_not_found
    ├── Conflict                409 duplicate / conflict / idempotency_conflict
    ├── RateLimited             429 rate_limited (carries retry_after seconds)
    ├── ServerError             500 internal_error / schedule_failed
    └── ServiceUnavailable      503 service_unavailable (carries retry_after seconds)
"""

from __future__ import annotations


def short_text(error: BaseException, limit: int = 300) -> str:
    """The exception's text on one line, cut at `limit` characters."""
    text = " ".join(str(error).split())
    return text[:limit] + " …" if len(text) > limit else text


def one_line(error: BaseException, limit: int = 300) -> str:
    """`Type: text` on one line: a reason for a log line, not a dump (an outage fails
    every request alike; a traceback each would flood the log)."""
    text = short_text(error, limit)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class PermanentJobError(Exception):
    """A job cannot succeed however often it is retried (what it names is gone or invalid).
    Raised by a workflow after it has recorded the final state of what it was working on;
    the job ends at once, without retries (actors/retries.py)."""


class PostroomError(Exception):
    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, path: str | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.path = path

    def envelope(self) -> dict:
        error = {"code": self.code, "message": self.message}
        if self.path is not None:
            error["path"] = self.path
        return {"error": error}


# The plain kinds, one a line: a status and a default code are all that tells them apart.
class ValidationFailed(PostroomError): status, code = 400, "validation_error"
class ConfirmationRequired(PostroomError): status, code = 400, "confirmation_required"
class MissingFromEmail(PostroomError): status, code = 400, "missing_from_email"
class NoContent(PostroomError): status, code = 400, "no_content"
class InvalidSchedule(PostroomError): status, code = 400, "invalid_schedule"
class Unauthorized(PostroomError): status, code = 401, "unauthorized"
class Forbidden(PostroomError): status, code = 403, "forbidden"
class NotFound(PostroomError): status, code = 404, "not_found"
class Conflict(PostroomError): status, code = 409, "conflict"


class InvalidAnswers(ValidationFailed):
    """A form submission with one or more wrong fields. The envelope names the first (the
    spec's error has one path); the hosted page shows every one beside its field."""

    def __init__(self, problems: dict[str, str]):
        path, message = next(iter(problems.items()))
        super().__init__(message, path=path)
        self.problems = problems


class ServerError(PostroomError):
    status, code = 500, "internal_error"
    # Set by the workflow that raises it, absent otherwise (read with getattr): declared, not defaulted.
    unpublished: list[str]  # the items whose jobs were not published (workflows/publisher.not_queued)
    unsent: int             # the request's emails not sent, given back to the limits (workflows/accept_email)


class RateLimited(PostroomError):
    status, code = 429, "rate_limited"

    def __init__(self, message: str, *, retry_after: int, code: str | None = None):
        super().__init__(message, code=code)
        self.retry_after = retry_after


# Retry-After on a 503 (a dependency away): a store or broker restart takes seconds, not minutes.
UNAVAILABLE_RETRY_AFTER_SECONDS = 5


class ServiceUnavailable(PostroomError):
    """A dependency (the store) cannot be reached: nothing was done, or, when
    `outcome_unknown`, a write may have been applied without its answer arriving."""
    status, code = 503, "service_unavailable"

    def __init__(self, message: str, *, retry_after: int, outcome_unknown: bool = False):
        super().__init__(message)
        self.retry_after = retry_after
        self.outcome_unknown = outcome_unknown
