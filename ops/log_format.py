"""Log records as one JSON object per line (POSTROOM_LOG_FORMAT=json), for log shippers.

Each line: `ts` (UTC, ISO 8601), `level`, `logger`, `message`, the ids a record carries
as extra fields (`workspace_id`, `message_id`, `campaign_id`, `contact_id`, `job_id`,
`delivery_id`, `report_id`, `request_id`: `log.info("…", extra={"message_id": mid})`), the
access log's request fields (`method`, `route`, `status`, `ms`: front/access_log.py),
`process`, and `exception` (the formatted traceback) when there is one."""

from __future__ import annotations

import datetime as _dt
import json
import logging

ID_FIELDS = ("workspace_id", "message_id", "campaign_id", "contact_id", "job_id", "delivery_id", "report_id",
             "request_id")
REQUEST_FIELDS = ("method", "route", "status", "ms")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for name in ID_FIELDS + REQUEST_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(log_format: str) -> None:
    """Put every handler of the root logger on JSON when asked (the `dramatiq` CLI sets up
    its own handlers in worker processes before our boot module runs)."""
    if log_format != "json":
        return
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO)
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    for handler in root.handlers:
        handler.setFormatter(JsonFormatter())
