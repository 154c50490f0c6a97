"""The log guard (ops/logs.py) on the records that carried mail (Dramatiq naming a failed
job by its arguments, a store error quoting the document it refused), and
POSTROOM_LOG_FORMAT=json: every record of the real processes one JSON object a line."""

from __future__ import annotations

import io
import json
import logging

from dramatiq.broker import MessageProxy
from dramatiq.message import Message
from pymongo.errors import BulkWriteError, DuplicateKeyError

from ops.log_format import JsonFormatter
from ops.logs import LOG_FORMAT, LibraryWarningsOnly, NoMailInLogs
from tests.support.polling import wait_until
from tests.support.private_stack import private_stack

BODY = "<p>Dear Ada, your code is 918273</p>"
TOKEN = "eyJ3IjoiYWNtZSJ9.c2lnbmVk"


def logged(emit, name: str | None = None, formatter: logging.Formatter | None = None) -> str:
    """What a handler set up as ops/logs.py sets them up writes for the records `emit`
    logs (on a logger named `name`, a library's if not ours)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter or logging.Formatter(LOG_FORMAT))
    handler.addFilter(LibraryWarningsOnly())
    handler.addFilter(NoMailInLogs())
    logger = logging.getLogger(name or f"postroom.test.logs.{id(stream)}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        emit(logger)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


HOOK = "https://hookuser:PASSW0RD@hooks.example/in?token=S3CRET&x=1"


def test_urls_lose_their_user_info_and_query_string_in_every_line():
    def emit(logger):
        logger.warning('HTTP Request: POST %s "HTTP/1.1 500"', HOOK)
        logger.warning("store at mongodb://admin:PASSW0RD@db.example:27017/?authSource=S3CRET")
        try:
            raise RuntimeError(f"could not reach {HOOK}")
        except RuntimeError:
            logger.exception("delivery failed")
    text = logged(emit, name="httpx")
    assert "PASSW0RD" not in text and "S3CRET" not in text and "hookuser" not in text, text
    assert 'POST https://hooks.example/in?… "HTTP/1.1 500"' in text
    assert "mongodb://db.example:27017/?…" in text
    assert "RuntimeError: could not reach https://hooks.example/in?…" in text


def test_library_lines_below_warning_are_dropped_and_ours_kept():
    def emit(logger):
        logger.info(f"HTTP Request: POST {HOOK}")
        logger.warning("a library's warning")
    for library in ("httpx", "dramatiq.worker"):
        text = logged(emit, name=library)
        assert "HTTP Request" not in text and "a library's warning" in text
    ours = logged(emit, name="postroom.webhooks")
    assert "HTTP Request: POST https://hooks.example/in?…" in ours and "a library's warning" in ours


def send_job() -> Message:
    mime = f"To: ada@example.org\r\nList-Unsubscribe: <https://x.example/u/{TOKEN}>\r\n\r\n{BODY}"
    return Message(queue_name="send", actor_name="send_messages",
                   args=([{"_id": "msg_1", "recipients": ["ada@example.org"], "data": mime}],),
                   kwargs={}, options={})


def test_a_failed_job_is_named_by_actor_and_id_without_its_arguments():
    job = send_job()

    def emit(logger):
        try:
            raise RuntimeError("store away")
        except RuntimeError:
            # what dramatiq's worker logs when an actor raises
            logger.error("Failed to process message %s with unhandled exception.", MessageProxy(job),
                         exc_info=True)
    text = logged(emit)

    assert f"send_messages(job {job.message_id})" in text
    assert "RuntimeError: store away" in text  # the reason stays
    assert BODY not in text and TOKEN not in text and "ada@example.org" not in text


def test_a_store_error_keeps_its_codes_and_loses_its_documents():
    refused = BulkWriteError({"writeErrors": [{"index": 0, "code": 11000, "errmsg": f"dup key {TOKEN}",
                                               "op": {"_id": "msg_1", "html": BODY}}]})
    duplicate = DuplicateKeyError(f"E11000 dup key: {{ email: \"ada@example.org\" }} {BODY}", 11000)

    def emit(logger):
        try:
            try:
                raise duplicate
            except DuplicateKeyError as cause:
                raise refused from cause
        except BulkWriteError:
            logger.exception("insert failed")
    text = logged(emit)

    assert "codes 11000" in text and "code 11000" in text
    assert "The above exception led to the following one" in text
    assert BODY not in text and TOKEN not in text and "ada@example.org" not in text


def test_other_exception_texts_are_cut_to_one_short_line():
    def emit(logger):
        try:
            raise ValueError("first line\n" + "x" * 5000)
        except ValueError:
            logger.exception("failed")
    text = logged(emit)

    [reason] = [line for line in text.splitlines() if line.startswith("ValueError:")]
    assert reason.startswith("ValueError: first line xxx") and len(reason) < 400


def json_records(log_path) -> tuple[list[dict], list[str]]:
    """(the records, the lines that are neither records nor our own start-up prints)."""
    records, other = [], []
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            records.append(json.loads(line))
        elif line.strip() and not line.startswith("postroom "):
            other.append(line)
    return records, other


def test_json_logs_are_one_object_per_line_with_the_ids(service, store_url, run_dir):
    with private_stack(service, store_url, run_dir, "jsonlogs", env={"POSTROOM_LOG_FORMAT": "json"}) as stack:
        worker = stack.start_worker("worker")
        tenant = stack.tenant()
        job = tenant.post("/contacts/import", content=b"email\nann@example.com\nnot-an-address\n",
                          headers={"Content-Type": "text/csv"}).json()["data"]
        wait_until(lambda: tenant.get(f"/contacts/import/{job['id']}").json()["data"]["status"] == "completed",
                   timeout=60, what="the import job")
        records = wait_until(lambda: [r for r in json_records(worker.log_path)[0] if r.get("job_id") == job["id"]],
                             what="the import's log record")
        assert records[0]["workspace_id"] == tenant.workspace_id
        assert records[0]["message"] == "contact import completed: 2 rows, 1 errors"
        assert {"ts", "level", "logger", "process"} <= set(records[0])
        records, other = json_records(worker.log_path)
        assert other == [], other[:5]
        assert records and all(is_ours_or_a_warning(r) for r in records), records[:5]
        status = tenant.get(f"/contacts/import/{job['id']}", headers={"X-Request-Id": "req-42"})
        assert status.headers["X-Request-Id"] == "req-42"
        [access] = wait_until(lambda: [r for r in json_records(stack.log_dir / "front.log")[0]
                                       if r.get("request_id") == "req-42"], what="the access log line")
    front_records, front_other = json_records(stack.log_dir / "front.log")
    assert front_other == [], front_other[:5]
    assert all(is_ours_or_a_warning(r) for r in front_records), front_records[:5]
    # one access line a request: method, route (the rule, not the path), status, ms, workspace, request id
    assert access["logger"] == "postroom.access" and access["level"] == "info"
    assert (access["method"], access["route"], access["status"]) == ("GET", "/api/v1/contacts/import/<job_id>", 200)
    assert access["workspace_id"] == tenant.workspace_id and isinstance(access["ms"], float)
    assert access["message"].startswith("GET /api/v1/contacts/import/<job_id> 200 ")
    started = [r for r in front_records if r.get("route") == "/api/v1/contacts/import" and r["status"] == 202]
    assert len(started) == 1 and len(started[0]["request_id"]) == 32  # ours when the client sends none


def is_ours_or_a_warning(record: dict) -> bool:
    return record["logger"].startswith("postroom") or record["level"] in ("warning", "error", "critical")


def test_an_access_line_in_text_names_its_fields():
    def emit(logger):
        logger.info("GET /api/v1/health 200 1.2 ms workspace=- request=abc",
                    extra={"method": "GET", "route": "/api/v1/health", "status": 200, "ms": 1.2, "request_id": "abc"})
    line = json.loads(logged(emit, formatter=JsonFormatter()))
    assert (line["method"], line["route"], line["status"], line["ms"], line["request_id"]) == \
        ("GET", "/api/v1/health", 200, 1.2, "abc")
