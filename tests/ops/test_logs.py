"""POSTROOM_LOG_FORMAT=json: every log record of the real processes is one JSON object per
line, carrying the ids it knows as fields."""

import json

from tests.support.polling import wait_until
from tests.support.private_stack import private_stack


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
        job = tenant.post("/contacts/import", content="email\nann@example.com\nnot-an-address\n".encode(),
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
        assert any(r["logger"].startswith("dramatiq") for r in records)
    front_records, front_other = json_records(stack.log_dir / "front.log")
    assert front_other == [], front_other[:5]
    assert any(r["logger"] == "hypercorn.error" for r in front_records)
