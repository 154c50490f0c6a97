"""The inbound port's handler (ops/inbound.py) for mail to workspaces' inbound addresses,
driven as aiosmtpd drives it (RCPT, then DATA) on the session's real store: unknown
recipients 550, a flooding sender 450 with its wait, hostile structure refused whole,
one message stored once per recipient and workspace, a bounce report beside it still
taking its own path; and every real-world message of the parser's corpus delivered or
refused with a reason. (The socket, SIZE and 552: tests/e2e/test_inbound_routes.py.)"""

import types

import pytest
from aiosmtpd.smtp import Envelope

from mongo import inbound_messages, inbound_reports
from ops.inbound import InboundHandler
from pipelines.adapters.dns_client import DnsPythonResolver
from pipelines.core.settings import Settings
from pipelines.workflows import manage_inbound_routes, receive_inbound
from tests.pipelines.test_inbound_corpus import MESSAGES, REFUSED
from tests.support.inbound_mail import mail

pytestmark = pytest.mark.usefixtures("front_in_process")  # the session's store with its indexes



@pytest.fixture
def port(session_store):
    """A handler on the session's store whose hand-offs are recorded (no broker)."""
    handed: list[str] = []

    async def record(item_id):
        handed.append(item_id)

    def make(per_minute: int = 60) -> tuple[InboundHandler, list[str]]:
        settings = Settings(inbound_messages_per_minute=per_minute)
        return InboundHandler(session_store.db, settings, record, record), handed
    return make


def address(session_store, workspace_id: str, tag: str = "") -> str:
    token = session_store.run(manage_inbound_routes.token, workspace_id)
    return f"{token}{'+' + tag if tag else ''}@inbound.postroom.test"


def transaction(session_store, handler, rcpts: list[str], raw: bytes | None, *, peer: str = "192.0.2.7",
                mail_from: str = "ann@sender.example") -> list[str]:
    """RCPT for each of `rcpts`, then DATA with `raw` if given: every answer."""
    session = types.SimpleNamespace(peer=(peer, 25000), host_name="mx.sender.example")
    envelope = Envelope()
    envelope.mail_from = mail_from

    async def talk():
        answers = [await handler.handle_RCPT(None, session, envelope, r, []) for r in rcpts]
        if raw is not None and envelope.rcpt_tos:
            envelope.content = envelope.original_content = raw
            answers.append(await handler.handle_DATA(None, session, envelope))
        return answers
    return session_store.call(talk())


def stored(session_store, ids: list[str]) -> list[dict]:
    return [session_store.run(inbound_messages.load, i) for i in ids]


def test_unknown_recipients_are_refused_at_rcpt(session_store, port, front_in_process):
    handler, _ = port()
    known = address(session_store, front_in_process.tenant().workspace_id)
    answers = transaction(session_store, handler, ["abcdefghijklmnop@inbound.postroom.test",
                                                   known.replace("@inbound.", "@elsewhere."), known], None)
    assert [a[:9] for a in answers] == ["550 5.1.1", "550 5.1.1", "250 OK"]


def test_one_message_to_two_workspaces_is_stored_once_for_each(session_store, port, front_in_process):
    handler, handed = port()
    first, second = front_in_process.tenant(), front_in_process.tenant()
    to = [address(session_store, first.workspace_id, "a"), address(session_store, second.workspace_id)]
    answers = transaction(session_store, handler, to, mail(to=", ".join(to)))
    assert answers[:2] == ["250 OK", "250 OK"] and answers[2].startswith("250 2.0.0 received as ")
    ids = answers[2].split("received as ", 1)[1].split()
    assert handed[-2:] == ids
    docs = stored(session_store, ids)
    assert [(d["workspace_id"], d["recipient"], d["tag"]) for d in docs] == [
        (first.workspace_id, to[0], "a"), (second.workspace_id, to[1], "")]
    assert all(d["client_ip"] == "192.0.2.7" and d["helo"] == "mx.sender.example" for d in docs)
    assert session_store.run(inbound_messages.raw, docs[0]) == mail(to=", ".join(to))


def test_a_flooding_sender_is_told_to_come_back_later(session_store, port, front_in_process):
    handler, _ = port(per_minute=2)
    to = address(session_store, front_in_process.tenant().workspace_id)
    for _ in range(2):
        assert transaction(session_store, handler, [to], mail(to=to))[-1].startswith("250 2.0.0")
    refused = transaction(session_store, handler, [to], mail(to=to))
    assert refused[0].startswith("450 4.7.1 too many messages from this sender; try again in ")
    # another IP with the same MAIL FROM too; another sender from another IP is welcome
    assert transaction(session_store, handler, [to], None, peer="192.0.2.8")[0].startswith("450 4.7.1")
    assert transaction(session_store, handler, [to], None, peer="192.0.2.8", mail_from="bob@b.example") == ["250 OK"]


def test_hostile_structure_is_refused_whole_and_nothing_is_stored(session_store, port, front_in_process):
    handler, handed = port()
    to = address(session_store, front_in_process.tenant().workspace_id)
    headers = b"".join(b"X-H%d: v\r\n" % n for n in range(5000))
    answers = transaction(session_store, handler, [to], headers + mail(to=to))
    assert answers[-1][:1] == "5" and "received" not in answers[-1]
    assert handed == []


def test_a_bounce_report_beside_an_inbound_recipient_keeps_its_own_path(session_store, port, front_in_process):
    handler, handed = port()
    to = address(session_store, front_in_process.tenant().workspace_id)
    answers = transaction(session_store, handler, [to, "fbl@bounces.postroom.test"], mail(to=to))
    assert answers[-1].startswith("250 2.0.0 stored as ")  # the report's answer, after the inbound message's
    report = session_store.run(inbound_reports.get, answers[-1].rsplit(" ", 1)[1])
    assert report["rcpt_tos"] == ["fbl@bounces.postroom.test"]
    [message] = stored(session_store, [h for h in handed if h != report["_id"]])
    assert message["recipient"] == to


def test_without_a_broker_the_port_processes_the_message_itself(session_store, port, front_in_process):
    """`postroom inbound` beside `postroom up` (no RabbitMQ): the actor's work runs in the
    port's process (ops/inbound._receive_here), the same workflow the `inbound` actor runs."""
    from ops.inbound import _receive_here
    handler, handed = port()
    to = address(session_store, front_in_process.tenant().workspace_id, "7")
    answers = transaction(session_store, handler, [to], mail(to=to, subject="Beside up"))
    [message_id] = answers[-1].split("received as ", 1)[1].split()
    settings = Settings(dns_resolver=front_in_process.env["POSTROOM_DNS_RESOLVER"])
    session_store.call(_receive_here(session_store.db, settings, message_id))
    done = session_store.run(inbound_messages.load, message_id)
    assert done["status"] == "processed" and done["subject"] == "Beside up" and done["tag"] == "7"


# -- the real-world corpus through the port ---------------------------------------------------


@pytest.fixture(scope="module")
def corpus_workspace(session_store, front_in_process):
    """One workspace whose catch-all route takes every corpus message (delivery is only
    planned here: nothing listens at the route's URL)."""
    tenant = front_in_process.tenant()
    route, _secret = session_store.call(manage_inbound_routes.create_route(
        session_store.db, Settings(), tenant.workspace_id, pattern="*", target_url="http://127.0.0.1:9/inbound",
        priority=0, description=None))
    return tenant.workspace_id, route["_id"]


@pytest.mark.parametrize("path", MESSAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_corpus_message_is_delivered_or_refused_with_a_reason(session_store, port, front_in_process,
                                                                     corpus_workspace, path):
    """As a remote MTA hands it over: the answer to DATA is a 250 and the message is
    processed (parsed, authenticated, its `email.received` planned for the route), or a 5xx
    that says why; processing raises nothing (0 server errors)."""
    workspace_id, route_id = corpus_workspace
    handler, _ = port(per_minute=0)
    to = address(session_store, workspace_id, "corpus")
    raw = path.read_bytes()
    answer = transaction(session_store, handler, [to], raw)[-1]
    if path.name in REFUSED:
        assert answer == REFUSED[path.name]
        return
    assert answer.startswith("250 2.0.0 received as "), answer
    [message_id] = answer.split("received as ", 1)[1].split()
    resolver = DnsPythonResolver(front_in_process.env["POSTROOM_DNS_RESOLVER"])
    session_store.call(receive_inbound.process(session_store.db, None, resolver, message_id))
    done = session_store.run(inbound_messages.load, message_id)
    assert (done["status"], done["route_id"]) == ("processed", route_id)
    planned = session_store.run(lambda db: db.webhook_deliveries.find_one(
        {"webhook_id": route_id, "event_id": f"inbound:{message_id}"}))
    assert planned is not None and planned["event"] == "email.received"
