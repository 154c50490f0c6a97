"""What operators see of the reports `postroom inbound` received, through the real CLI
against the running service: `inbound reports`, `inbound show`, `inbound rerun`."""

import json
import uuid

from mongo import inbound_reports
from pipelines.core.clock import now_iso
from tests.support import bounce_corpus, reports
from tests.support.inbound import BOUNCE_DOMAIN, deeply_nested, report_done, sent_message, submit, verp
from tests.support.services import run_postroom


def postroom_json(service, *args, expect=0):
    return json.loads(run_postroom(service.env, *args, "--json", expect=expect).stdout)


def out_of_office(service, tenant):
    """An auto-reply that came back to a message's return path: stored, not understood."""
    message_id = sent_message(service, tenant, f"carol-{uuid.uuid4().hex[:6]}@example.com")
    raw = reports.load("out_of_office", recipient="carol@example.com", message_id=message_id,
                       bounce_domain=BOUNCE_DOMAIN)
    return report_done(service, submit(service, raw, verp(message_id))), raw


def left_unparseable(service, raw: bytes, message_id: str) -> str:
    """A report as an older version left it: stored and finished `unparseable`."""
    doc = {"_id": str(uuid.uuid4()), "mail_from": "", "rcpt_tos": [verp(message_id)], "raw": raw.decode("latin-1"),
           "size_bytes": len(raw), "status": "received", "received_at": now_iso(), "enqueued_at": now_iso(),
           "processed_at": None, "detail": ""}

    async def seed(db):
        await inbound_reports.store(db, doc)
        await inbound_reports.finish(db, doc["_id"], "unparseable", "not a DSN, ARF or known bounce style")
    service.store.call(seed(service.store.db))
    return doc["_id"]


def test_reports_lists_what_was_not_understood_by_status_and_workspace(service, tenant):
    report, _ = out_of_office(service, tenant)
    message_id = sent_message(service, tenant, f"dave-{uuid.uuid4().hex[:6]}@example.net")
    parsed = report_done(service, submit(service, reports.load(
        "rfc3464_permanent", recipient=f"dave-{message_id}@example.net", message_id=message_id,
        bounce_domain=BOUNCE_DOMAIN), verp(message_id)))
    assert (report["status"], parsed["status"]) == ("unparseable", "unmatched")

    listed = postroom_json(service, "inbound", "reports", "--status", "unparseable", "--workspace", tenant.workspace_id)
    assert [(r["id"], r["status"], r["workspace_id"]) for r in listed] == \
        [(report["_id"], "unparseable", tenant.workspace_id)]
    assert "raw" not in listed[0]
    everything = postroom_json(service, "inbound", "reports", "--workspace", tenant.workspace_id)
    assert [r["id"] for r in everything] == [parsed["_id"], report["_id"]]  # newest first
    assert postroom_json(service, "inbound", "reports", "--workspace", service.tenant().workspace_id) == []

    text = run_postroom(service.env, "inbound", "reports", "--status", "unparseable",
                        "--workspace", tenant.workspace_id).stdout
    assert report["_id"] in text and "unparseable" in text and "not a DSN" in text


def test_show_prints_the_outcome_a_headers_summary_and_the_raw_report(service, tenant):
    report, raw = out_of_office(service, tenant)
    text = run_postroom(service.env, "inbound", "show", report["_id"]).stdout
    assert "status: unparseable" in text
    assert "headers:\n" in text and "  Subject: Out of office: Hello" in text
    assert "parts: text/plain" in text
    assert raw.decode().replace("\r\n", "\n") in text

    shown = postroom_json(service, "inbound", "show", report["_id"])
    assert shown["raw"].encode("latin-1") == raw and shown["headers"]["Subject"] == "Out of office: Hello"
    assert "no inbound report nope" in run_postroom(service.env, "inbound", "show", "nope", expect=1).stderr


def test_a_report_that_failed_is_listed_and_shown_with_its_error(service):
    message_id = "msg_" + uuid.uuid4().hex
    report = report_done(service, submit(service, deeply_nested(1200, message_id), verp(message_id)), timeout=60)
    listed = postroom_json(service, "inbound", "reports", "--status", "failed")
    assert report["_id"] in [r["id"] for r in listed]
    text = run_postroom(service.env, "inbound", "show", report["_id"]).stdout
    assert "status: failed" in text and "RecursionError" in text and "Subject: nested" in text


def test_rerun_parses_a_report_again_with_the_current_code_and_applies_it(service, tenant):
    """A qmail notice an older version could not read, parsed now."""
    sample = bounce_corpus.by_name()["qmail_03"]
    [address] = sample.addresses
    message_id = sent_message(service, tenant, address)
    report_id = left_unparseable(service, sample.raw, message_id)
    before = service.store.run(inbound_reports.stats)

    text = run_postroom(service.env, "inbound", "rerun", report_id).stdout
    assert f"{report_id}: unparseable → parsed (qmail, 1 bounce)" in text

    [record] = tenant.get("/bounces").json()["data"]
    assert (record["email"], record["type"], record["category"], record["message_id"]) == \
        (address, "permanent", "address", message_id)
    after = service.store.run(inbound_reports.stats)
    assert (after["unparseable"], after["parsed"]) == (before["unparseable"] - 1, before["parsed"] + 1)
    # applied once: a parsed report is not run again
    assert "already" in run_postroom(service.env, "inbound", "rerun", report_id, expect=2).stderr
    assert "no inbound report nope" in run_postroom(service.env, "inbound", "rerun", "nope", expect=1).stderr


def test_rerun_all_unparseable_runs_every_one_and_says_what_became_of_each(service, tenant):
    sample = bounce_corpus.by_name()["exim_01"]
    [address] = sample.addresses
    message_id = sent_message(service, tenant, address)
    readable = left_unparseable(service, sample.raw, message_id)
    still_not = left_unparseable(service, b"Subject: hello\r\n\r\njust a note\r\n", message_id)

    results = {r["id"]: r for r in postroom_json(service, "inbound", "rerun", "--all-unparseable")}
    assert (results[readable]["before"], results[readable]["status"], results[readable]["style"]) == \
        ("unparseable", "parsed", "exim")
    assert (results[still_not]["before"], results[still_not]["status"]) == ("unparseable", "unparseable")
    assert [b["email"] for b in tenant.get("/bounces").json()["data"]] == [address]
