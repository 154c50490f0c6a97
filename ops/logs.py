"""Logging for every `postroom` process: one format, and no mail in any line.

Jobs carry mail: a `send` job's arguments are whole rendered messages (bodies, recipient
addresses, signed unsubscribe tokens). Dramatiq names a job by its arguments when it logs
one (a failed job: `Failed to process message send_messages([...])`), and PyMongo's write
errors carry the documents they refused. So every record passes `NoMailInLogs` on its way
to a handler: a job is named by its actor and id only, a store error by its codes only,
and other exception texts are cut to one short line. Tracebacks keep their frames (file,
line, function), which is what an operator needs to find the cause."""

from __future__ import annotations

import logging
import traceback

from dramatiq.broker import MessageProxy
from dramatiq.message import Message
from pymongo.errors import BulkWriteError, OperationFailure

from pipelines.errors import short_text

from .log_format import JsonFormatter

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Longest exception text kept in a log line: enough for a reason, too short for a message.
MAX_EXCEPTION_TEXT = 300


def configure(level: int = logging.INFO, log_format: str = "text") -> None:
    """Root logging for this process, once, on stderr: plain lines, or one JSON object a
    line with `log_format="json"` (ops/log_format.py)."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
    guard = NoMailInLogs()
    for handler in logging.getLogger().handlers:
        handler.addFilter(guard)
        if log_format == "json":
            handler.setFormatter(JsonFormatter())
    # pika logs each failed connection attempt over several ERROR lines; whoever called it
    # (an enqueue, a consumer) logs the failure once, with its reason.
    logging.getLogger("pika").setLevel(logging.CRITICAL)


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
    return short_text(error, MAX_EXCEPTION_TEXT)


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


class NoMailInLogs(logging.Filter):
    """Rewrites a record so that no job argument and no stored document reaches the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, (Message, MessageProxy)):
            record.msg = job_name(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(job_name(a) if isinstance(a, (Message, MessageProxy)) else a
                                for a in record.args)
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            # The formatter prints exc_text as it is, instead of formatting exc_info.
            record.exc_text = safe_traceback(record.exc_info[1])
        return True
