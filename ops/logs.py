"""Logging for every `postroom` process: one format, and no mail in any line.

Jobs carry mail: a `send` job's arguments are whole rendered messages (bodies, recipient
addresses, signed unsubscribe tokens). Dramatiq names a job by its arguments when it logs
one (a failed job: `Failed to process message send_messages([...])`), and PyMongo's write
errors carry the documents they refused. So every record passes `NoMailInLogs` on its way
to a handler: a job is named by its actor and id only, a store error by its codes only,
and other exception texts are cut to one short line. Tracebacks keep their frames (file,
line, function), which is what an operator needs to find the cause.

URLs carry secrets too: customers' webhook URLs often hold a token in their query string
or a password in their user info, and so do store and broker URLs. Every URL in a line
(message and traceback) is written without its user info and with its query string
replaced by `?…`. Libraries (httpx logs every request it sends, Dramatiq, Hypercorn, …)
reach the log at WARNING and above only; our own loggers (`postroom.*`) at INFO."""

from __future__ import annotations

import logging
import re
import traceback

from dramatiq.broker import MessageProxy
from dramatiq.message import Message
from pymongo.errors import BulkWriteError, OperationFailure

from pipelines.core.errors import short_text

from .log_format import JsonFormatter

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Longest exception text kept in a log line: enough for a reason, too short for a message.
MAX_EXCEPTION_TEXT = 300
# Loggers that are ours (INFO and up reach the log); every other one is a library's.
OUR_LOGGERS = ("postroom", "pipelines", "front", "actors", "ops", "mongo", "__main__")
# scheme://, then the authority's user info (up to the last @ before the path), the host
# and path, and the query string: a URL as it appears inside a log line.
_URL = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^\s/?#@]*@)?"
                  r"(?P<rest>[^\s?#\"'<>]*)(?P<query>\?[^\s#\"'<>]*)?")


def redact_urls(text: str) -> str:
    """`text` with every URL's user info dropped and its query string replaced by `?…`."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: m["scheme"] + m["rest"] + ("?…" if m["query"] else ""), text)


def configure(level: int = logging.INFO, log_format: str = "text") -> None:
    """Root logging for this process, once, on stderr: plain lines, or one JSON object a
    line with `log_format="json"` (ops/log_format.py)."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
    guard, libraries = NoMailInLogs(), LibraryWarningsOnly()
    for handler in logging.getLogger().handlers:
        handler.addFilter(libraries)
        handler.addFilter(guard)
        if log_format == "json":
            handler.setFormatter(JsonFormatter())
    # pika logs each failed connection attempt over several ERROR lines; whoever called it
    # (an enqueue, a consumer) logs the failure once, with its reason.
    logging.getLogger("pika").setLevel(logging.CRITICAL)
    # httpx logs one INFO line per request with the full URL (a webhook's token): not even made
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


def job_name(message: Message | MessageProxy) -> str:
    return f"{message.actor_name}(job {message.message_id})"


def exception_text(error: BaseException) -> str:
    """What an exception says, without the data it may carry."""
    if isinstance(error, BulkWriteError):
        codes = sorted({e.get("code") for e in error.details.get("writeErrors", [])} | (
            {"write concern"} if error.details.get("writeConcernErrors") else set()), key=str)
        return f"bulk write refused (codes {', '.join(map(str, codes))})"
    if isinstance(error, OperationFailure):  # DuplicateKeyError included: its text quotes the key
        return f"store refused the operation (code {error.code})"
    # Anything else (connection errors name hosts and states): its text, cut short.
    return redact_urls(short_text(error, MAX_EXCEPTION_TEXT))


def safe_traceback(error: BaseException) -> str:
    """The traceback as Python prints it (chained causes included), each exception's text
    replaced by `exception_text`."""
    chain, seen = [], set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        chain.append(current)
        seen.add(id(current))
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    parts = []
    for position, item in enumerate(reversed(chain)):
        if position:
            parts.append("\nThe above exception led to the following one:\n\n")
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_list(traceback.extract_tb(item.__traceback__)))
        name = type(item).__qualname__
        module = type(item).__module__
        parts.append(f"{name if module == 'builtins' else module + '.' + name}: {exception_text(item)}\n")
    return "".join(parts).rstrip("\n")


class LibraryWarningsOnly(logging.Filter):
    """Lets a library's record through at WARNING and above, ours from INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.split(".", 1)[0] in OUR_LOGGERS


class NoMailInLogs(logging.Filter):
    """Rewrites a record so that no job argument, no stored document and no URL's user
    info or query string reaches the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, (Message, MessageProxy)):
            record.msg = job_name(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(job_name(a) if isinstance(a, (Message, MessageProxy)) else a
                                for a in record.args)
        message = record.getMessage()
        redacted = redact_urls(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and record.exc_info[1] is not None:
            # The formatter prints exc_text as it is, instead of formatting exc_info; made from
            # the exception each time, since a handler that ran first may have set it whole
            record.exc_text = safe_traceback(record.exc_info[1])
        elif record.exc_text:
            record.exc_text = redact_urls(record.exc_text)
        return True
