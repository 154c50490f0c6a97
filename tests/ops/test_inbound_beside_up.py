"""`postroom inbound` beside `postroom up` on embedded defaults (no RabbitMQ, so no broker
another process could consume from): a report is handled by the inbound process itself,
at once — not by the scheduler's sweep two minutes later."""

import signal
import uuid

import httpx
import pytest

from ops.embedded_store import free_port
from tests.ops.test_up import bare_env, cli, start_up, stop_with  # noqa: F401 - bare_env: the fixture, shared
from tests.support.inbound import dsn, submit_to_port, verp
from tests.support.polling import wait_until
from tests.support.services import Process

pytestmark = pytest.mark.e2e  # `postroom up` and `postroom inbound` processes of its own


@pytest.mark.slow
def test_a_report_beside_up_is_applied_without_rabbitmq(request, tmp_path):
    newcomer = request.getfixturevalue("bare_env")  # nothing configured but the data dir
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    up, base_url = start_up(newcomer, log_dir, "up")
    env = {**newcomer, "POSTROOM_INBOUND_PORT": str(free_port())}
    inbound = Process("inbound", ["inbound"], env, log_dir)
    try:
        workspace = cli(newcomer, "workspace", "create", "Beside", "--from-email", "me@beside.example", "--json")
        key = cli(newcomer, "key", "create", "--workspace", workspace["id"], "--json")["key"]
        recipient = f"gone-{uuid.uuid4().hex[:6]}@example.org"
        with httpx.Client(base_url=base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"},
                          timeout=30) as api:
            sent = api.post("/email/send", json={"to": recipient, "subject": "Hello", "text": "Hi"})
            assert sent.status_code == 202, sent.text
            message_id = sent.json()["data"]["message_id"]
            wait_until(lambda: api.get(f"/email/{message_id}/status").json()["data"]["status"] == "delivered",
                       30, "delivered to the capture outbox")

            answer = submit_to_port(int(env["POSTROOM_INBOUND_PORT"]), dsn(message_id, [
                {"final": recipient, "status": "5.1.1", "diagnostic": "550 5.1.1 user unknown"}]), verp(message_id))
            report_id = answer.rsplit(" ", 1)[-1]

            # well inside the sweep's 120 s: the inbound process handled it itself
            [record] = wait_until(lambda: api.get("/bounces").json()["data"], 30, "the bounce recorded")
            assert (record["email"], record["type"], record["message_id"]) == (recipient, "permanent", message_id)
            wait_until(lambda: api.get(f"/email/{message_id}/status").json()["data"]["status"] == "bounced", 30)
            # the report's effects are written one after another (bounce_reports._apply: the
            # status, then the suppression): wait for the last
            wait_until(lambda: [s["email"] for s in api.get("/suppressions").json()["data"]] == [recipient], 30,
                       "the address suppressed")

        [report] = cli(newcomer, "inbound", "reports", "--json")
        assert (report["id"], report["status"], report["attempts"], report["bounce_ids"]) == \
            (report_id, "parsed", 1, [record["id"]])
    finally:
        inbound.stop()
        assert stop_with(up, signal.SIGTERM) == 0, up.tail()
