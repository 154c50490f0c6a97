"""`postroom queues` against this run's RabbitMQ vhost, and against a `postroom up` on its
in-process broker."""

import json
import signal

import httpx
import pytest

from actors.broker import QUEUES
from ops.embedded_store import free_port
from ops.queues import inspect
from tests.ops.test_up import bare_env, cli, start_up, stop_with  # noqa: F401 - bare_env: the fixture, shared
from tests.support.polling import wait_until
from tests.support.services import run_postroom
from tests.support.smtp_sink import SmtpSink

EVERY_QUEUE = {name + suffix for name in QUEUES for suffix in ("", ".DQ", ".XQ")}


def queues(env, *args, expect=0):
    return run_postroom(env, "queues", *args, expect=expect)


def test_queues_json_lists_every_queue_with_its_counts(service):
    def listed_with_consumers():  # the management API's figures lag a worker that just connected (5 s samples)
        rows = json.loads(queues(service.env, "--json").stdout.strip().splitlines()[-1])
        counted = {r["queue"]: r["consumers"] for r in rows}
        return rows if counted["render"] and counted["send"] else None
    rows = wait_until(listed_with_consumers, 30, "the session's worker consuming render and send", interval=1)
    assert {r["queue"] for r in rows} == EVERY_QUEUE
    assert len(rows) == len(EVERY_QUEUE)
    by_name = {r["queue"]: r for r in rows}
    for name in ("render", "send"):
        row = by_name[name]
        assert row["source"] in ("management", "passive-declare")
        assert isinstance(row["ready"], int) and row["ready"] >= 0
        assert row["consumers"] >= 1, row  # the session's worker consumes them


def test_without_the_management_api_passive_declares_give_ready_counts(service):
    printed = queues(service.env, "--json", "--management-port", str(free_port())).stdout
    rows = json.loads(printed.strip().splitlines()[-1])
    assert {r["queue"] for r in rows} == EVERY_QUEUE
    by_name = {r["queue"]: r for r in rows}
    for name in ("render", "send", "render.DQ", "send.XQ"):
        assert by_name[name]["source"] == "passive-declare"
        assert isinstance(by_name[name]["ready"], int)
        assert by_name[name]["unacked"] is None  # only the management API knows it


def test_queues_prints_a_table_by_default(service):
    text = queues(service.env).stdout
    header, *lines = text.strip().splitlines()
    assert header.split()[:4] == ["queue", "ready", "unacked", "consumers"]
    assert {line.split()[0] for line in lines} == EVERY_QUEUE


def test_queues_without_rabbitmq_configured_says_so(service):
    env = {k: v for k, v in service.env.items() if k != "POSTROOM_AMQP_URL"}
    result = queues(env, "--json", expect=2)
    assert "POSTROOM_AMQP_URL" in result.stderr


def test_the_management_api_is_asked_for_a_percent_encoded_vhost_decoded():
    """`amqp://…/%2F` (the README's example) names the vhost "/", not one called "%2F"."""
    rows = inspect("amqp://guest:guest@127.0.0.1:5672/%2F")
    assert {r["source"] for r in rows} == {"management"}
    assert all(isinstance(r["unacked"], int) for r in rows)


def in_process_rows(env) -> dict[str, dict]:
    rows = json.loads(queues(env, "--json").stdout.strip().splitlines()[-1])
    return {r["queue"]: r for r in rows}


@pytest.mark.e2e
def test_queues_shows_the_in_process_broker_of_a_running_up_with_ready_and_unacked_counts(request, tmp_path):
    sink = SmtpSink().start()
    sink.slow_down("slow.example", 6)  # its job stays taken (unacked) meanwhile; the counts travel every 2 s
    env = {**request.getfixturevalue("bare_env"), "POSTROOM_SMTP_URL": sink.url}
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    up, base_url = start_up(env, log_dir, "up-queues")
    try:
        rows = in_process_rows(env)
        assert set(rows) == EVERY_QUEUE
        assert {r["source"] for r in rows.values()} == {"in-process broker"}
        assert all(rows[name]["consumers"] == 1 and rows[name + ".DQ"]["consumers"] == 1 for name in QUEUES)

        workspace = cli(env, "workspace", "create", "Queued", "--from-email", "me@queued.example", "--json")
        key = cli(env, "key", "create", "--workspace", workspace["id"], "--json")["key"]
        sent = httpx.post(base_url + "/api/v1/email/send", headers={"Authorization": f"Bearer {key}"}, timeout=30,
                          json={"to": "someone@slow.example", "subject": "Hi", "text": "Hi"})
        assert sent.status_code == 202, sent.text
        wait_until(lambda: in_process_rows(env)["render"]["unacked"] == 1, 20, "the render job shown unacked")
        sink.wait_for("someone@slow.example", timeout=40)
        wait_until(lambda: in_process_rows(env)["render"] == {**rows["render"], "ready": 0, "unacked": 0}, 20,
                   "the render queue shown empty again")
    finally:
        assert stop_with(up, signal.SIGTERM) == 0, up.tail()
        sink.stop()
    assert queues(env, "--json", expect=2).stderr.count("no `postroom up`") == 1  # a stopped up is not shown
