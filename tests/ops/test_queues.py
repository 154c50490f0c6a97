"""`postroom queues` against this run's RabbitMQ vhost."""

import json

from actors.broker import QUEUES
from ops.embedded_store import free_port
from tests.support.services import run_postroom

EVERY_QUEUE = {name + suffix for name in QUEUES for suffix in ("", ".DQ", ".XQ")}


def queues(env, *args, expect=0):
    return run_postroom(env, "queues", *args, expect=expect)


def test_queues_json_lists_every_queue_with_its_counts(service):
    rows = json.loads(queues(service.env, "--json").stdout.strip().splitlines()[-1])
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
