"""Non-ASCII recipients through the API, the workers and a real SMTP sink: a Unicode
domain goes out in A-labels; a non-ASCII local part goes out over SMTPUTF8 when the next
hop offers it and otherwise fails alone, with the reason — never touching the other
messages of its batch, each of which arrives exactly once."""

from __future__ import annotations

import collections
import uuid

import pytest

from tests.support.barriers import mail_barrier
from tests.support.polling import wait_status, wait_until
from tests.support.private_stack import private_stack


def tag() -> str:
    return uuid.uuid4().hex[:8]


def send_batch(tenant, addresses: list[str]) -> list[str]:
    response = tenant.post("/email/batch", json={"messages": [
        {"to": a, "subject": "Order confirmation", "text": "Thank you"} for a in addresses]})
    assert response.status_code == 202, response.text
    return response.json()["data"]["message_ids"]


def final_statuses(tenant, message_ids: list[str], timeout: float = 60) -> dict[str, dict]:
    final = {"delivered", "failed", "bounced"}

    def check():
        views = {m: tenant.get(f"/email/{m}/status").json()["data"] for m in message_ids}
        return views if all(v["status"] in final for v in views.values()) else None
    return wait_until(check, timeout, "every message final")


def sent_beside_five_others(service, tenant, address: str) -> tuple[list[str], dict[str, dict]]:
    """`address` sent in one batch after five plain ASCII ones: the ids (it last) and each
    message's final status view, once a barrier has passed every send job of the batch."""
    ids = send_batch(tenant, [f"reader{i}-{tag()}@example.org" for i in range(5)] + [address])
    views = final_statuses(tenant, ids)
    mail_barrier(service)  # a second send job of any of them would be queued ahead of the sentinel's
    return ids, views


def copies(sink, message_ids: list[str], domain: str) -> collections.Counter:
    counted = sink.message_ids()
    return collections.Counter({m: counted[f"<{m}@{domain}>"] for m in message_ids})


def test_a_unicode_domain_in_a_batch_goes_out_in_a_labels_and_everyone_gets_one_copy(service, tenant):
    unicode_one = f"kunde-{tag()}@bücher.example"
    ids, views = sent_beside_five_others(service, tenant, unicode_one)

    assert [views[m]["status"] for m in ids] == ["delivered"] * 6
    assert copies(service.smtp, ids, "postroom.test") == collections.Counter({m: 1 for m in ids})
    assert views[ids[5]]["to"] == [unicode_one]  # shown as the client wrote it
    a_label = unicode_one.replace("bücher.example", "xn--bcher-kva.example")
    [received] = service.smtp.messages_to(a_label)
    assert received.rcpt_tos == [a_label] and received.message["To"] == a_label
    assert b"=?" not in next(line for line in received.data.split(b"\r\n") if line.startswith(b"To:"))


def test_a_non_ascii_local_part_without_smtputf8_fails_alone_with_the_reason(service, tenant):
    jurgen = f"jürgen-{tag()}@example.com"
    ids, views = sent_beside_five_others(service, tenant, jurgen)

    assert [views[m]["status"] for m in ids] == ["delivered"] * 5 + ["failed"]
    assert copies(service.smtp, ids[:5], "postroom.test") == collections.Counter({m: 1 for m in ids[:5]})
    assert service.smtp.messages_to(jurgen) == []
    assert "SMTPUTF8" in views[ids[5]]["error"] and jurgen in views[ids[5]]["error"]
    batch = tenant.get(f"/email/batch/{tenant.get(f'/email/{ids[0]}/status').json()['data']['batch_id']}")
    assert batch.json()["data"]["counts"]["delivered"] == 5 and batch.json()["data"]["counts"]["failed"] == 1
    assert tenant.get("/suppressions").json()["pagination"]["total"] == 0  # our refusal is not a bounce


def test_single_sends_to_international_addresses_end_in_a_final_state(service, tenant):
    jurgen, punycode = f"jürgen-{tag()}@example.com", f"user-{tag()}@xn--bcher-kva.example"
    first = tenant.post("/email/send", json={"to": jurgen, "subject": "Hi", "text": "x"})
    second = tenant.post("/email/send", json={"to": punycode, "subject": "Hi", "text": "x"})
    assert second.json()["data"]["to"] == [punycode]  # punycode stays punycode
    failed = wait_status(tenant, first.json()["data"]["message_id"], "failed")
    assert "SMTPUTF8" in failed["error"]
    wait_status(tenant, second.json()["data"]["message_id"], "delivered")
    assert service.smtp.messages_to(punycode)[0].rcpt_tos == [punycode]


@pytest.fixture
def utf8_stack(service, store_url, run_dir):
    with private_stack(service, store_url, run_dir, "smtputf8", sink_options={"smtputf8": True}) as stack:
        stack.start_worker("worker")
        yield stack


def test_a_non_ascii_local_part_goes_out_over_smtputf8_when_the_relay_offers_it(utf8_stack):
    stack = utf8_stack
    tenant = stack.tenant()
    ascii_ones = [f"reader{i}-{tag()}@example.org" for i in range(4)]
    jurgen, kunde = f"jürgen-{tag()}@bücher.example", f"kunde-{tag()}@bücher.example"
    ids = send_batch(tenant, ascii_ones + [jurgen, kunde])
    views = final_statuses(tenant, ids)
    mail_barrier(stack)  # a second send job of any of them would be queued ahead of the sentinel's

    assert [views[m]["status"] for m in ids] == ["delivered"] * 6
    assert copies(stack.smtp, ids, "postroom.test") == collections.Counter({m: 1 for m in ids})
    wire = jurgen.replace("bücher.example", "xn--bcher-kva.example")
    [received] = stack.smtp.messages_to(wire)
    assert "SMTPUTF8" in received.mail_options and received.message["To"] == wire
    [plain] = stack.smtp.messages_to(kunde.replace("bücher.example", "xn--bcher-kva.example"))
    assert "SMTPUTF8" not in plain.mail_options  # only the message that needs it asks for it
