"""The send fields Postmark and Resend users bring (issue #35): cc/bcc, several reply_to
addresses, attachments, the sender's own headers, metadata and tags, on POST /email/send,
each batch item and scheduled sends. Every refusal is 400 `validation_error` naming its
path; what is accepted is stored as docs/email.md says (files apart from the message)."""

import base64
import datetime as dt

import pytest

from pipelines.core.clock import iso, utcnow
from tests.support.api import assert_error
from tests.support.api import stored_message as stored
from tests.support.api import unique_address as address

PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(64))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def pdf(name="invoice.pdf", **extra):
    return {"filename": name, "content": b64(PDF), **extra}


def send(tenant, **fields):
    return tenant.post("/email/send", json={"to": address(), "subject": "Hi", "html": "<p>x</p>", **fields})


def files_stored(service, workspace_id):
    async def get(db):
        return await db.attachments.find({"workspace_id": workspace_id}, {"content": 0}).to_list()
    return service.store.run(get)


def accepted(response):
    assert response.status_code in (201, 202), response.text
    return response.json()["data"]["message_id"]


# --- cc, bcc, reply_to -------------------------------------------------------------------

def test_cc_and_bcc_are_stored_apart_from_to_and_shown_by_status(service, tenant):
    to, cc, bcc = address("to"), [address("cc1"), address("cc2")], address("bcc")
    message_id = accepted(send(tenant, to=to, cc=cc, bcc=bcc))
    doc = stored(service, message_id)
    assert (doc["to"], doc["cc"], doc["bcc"]) == ([to], cc, [bcc])
    status = tenant.get(f"/email/{message_id}/status").json()["data"]
    assert (status["to"], status["cc"], status["bcc"]) == ([to], cc, [bcc])


def test_an_address_given_twice_across_to_cc_and_bcc_is_kept_once_where_first_named(service, tenant):
    shared = address("shared")
    message_id = accepted(send(tenant, to=shared, cc=[shared.upper(), address("cc")], bcc=shared))
    doc = stored(service, message_id)
    assert doc["to"] == [shared] and shared not in doc["cc"] and len(doc["cc"]) == 1 and doc["bcc"] == []


@pytest.mark.parametrize("sizes, path", [((50, 1, 0), "cc"), ((1, 25, 25), "bcc"), ((20, 0, 31), "bcc")])
def test_more_than_50_recipients_in_to_cc_and_bcc_together_are_refused(tenant, sizes, path):
    to, cc, bcc = ([address() for _ in range(n)] for n in sizes)
    assert_error(send(tenant, to=to, cc=cc or None, bcc=bcc or None), 400, "validation_error", path)


def test_exactly_50_recipients_in_all_are_accepted(tenant):
    accepted(send(tenant, to=[address() for _ in range(20)], cc=[address() for _ in range(20)],
                  bcc=[address() for _ in range(10)]))


def test_a_suppressed_cc_leaves_the_message_and_its_header_but_the_others_stay(service, tenant):
    gone, kept = address("gone"), address("kept")
    assert tenant.post("/suppressions", json={"email": gone, "reason": "manual"}).status_code in (200, 201)
    response = send(tenant, cc=[gone, kept])
    message_id = accepted(response)
    assert response.json()["data"]["suppressed_recipients"] == [gone]
    assert stored(service, message_id)["cc"] == [kept]


@pytest.mark.parametrize("field, value, path", [
    ("cc", "nope", "cc"), ("cc", ["ok@example.org", "nope"], "cc[1]"), ("cc", 5, "cc"),
    ("bcc", ["a@example.org", "x=?utf-8?q?y?=@example.org"], "bcc[1]"), ("bcc", {"a": 1}, "bcc"),
    ("reply_to", [], "reply_to"), ("reply_to", ["a@example.org", "nope"], "reply_to[1]"),
    ("reply_to", [f"r{i}@example.org" for i in range(11)], "reply_to"),
])
def test_bad_recipients_name_their_path(tenant, field, value, path):
    assert_error(send(tenant, **{field: value}), 400, "validation_error", path)


def test_reply_to_takes_one_address_or_up_to_ten(service, tenant):
    one, several = address("one"), [address(f"r{i}") for i in range(10)]
    assert stored(service, accepted(send(tenant, reply_to=one)))["reply_to"] == one
    assert stored(service, accepted(send(tenant, reply_to=several)))["reply_to"] == several


# --- attachments ---------------------------------------------------------------------------

def test_files_are_stored_once_apart_from_the_message_which_keeps_references(service, tenant):
    message_id = accepted(send(tenant, attachments=[pdf(), {"filename": "logo.png", "content": b64(PNG),
                                                           "content_id": "cid:logo"}]))
    refs = stored(service, message_id)["attachments"]
    assert [(r["filename"], r["content_type"], r["content_id"], r["size"]) for r in refs] == [
        ("invoice.pdf", "application/pdf", None, len(PDF)), ("logo.png", "image/png", "logo", len(PNG))]
    assert all("content" not in r for r in refs)
    assert {f["sha256"] for f in files_stored(service, tenant.workspace_id)} == {r["sha256"] for r in refs}
    shown = tenant.get(f"/email/{message_id}/status").json()["data"]["attachments"]
    assert shown[1] == {"filename": "logo.png", "content_type": "image/png", "content_id": "logo", "size": len(PNG)}


def test_one_file_sent_to_a_whole_batch_is_stored_once(service, tenant):
    items = [{"to": address(), "subject": "Hi", "text": "x", "attachments": [pdf()]} for _ in range(25)]
    response = tenant.post("/email/batch", json={"messages": items})
    assert response.status_code == 202, response.text
    assert len(files_stored(service, tenant.workspace_id)) == 1


def test_a_scheduled_send_keeps_its_files_and_a_sandbox_key_stores_none(service, tenant):
    send_at = iso(utcnow() + dt.timedelta(hours=1))
    assert send(tenant, attachments=[pdf()], send_at=send_at).status_code == 201
    assert len(files_stored(service, tenant.workspace_id)) == 1
    sandbox_tenant = service.tenant()
    sandbox = service.extra_key(sandbox_tenant, sandbox=True)
    response = sandbox.post("/email/send", json={"to": address(), "subject": "Hi", "text": "x",
                                                 "attachments": [pdf()]})
    assert response.status_code == 202, response.text
    assert files_stored(service, sandbox_tenant.workspace_id) == []


@pytest.mark.parametrize("content, declared, name, expected", [
    (PNG, None, "photo", "image/png"),                          # read from the bytes
    (PDF, "application/octet-stream", "x.pdf", "application/octet-stream"),  # says nothing against them
    (b"a,b\n1,2\n", None, "table.csv", "text/csv"),              # read from the name
    (b"just some bytes", None, "notes", "application/octet-stream"),
    (b"PK\x03\x04rest", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "a.docx",
     "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    (b"hello", "TEXT/Plain", "a.txt", "text/plain"),
])
def test_the_type_is_read_from_the_bytes_then_the_name(service, tenant, content, declared, name, expected):
    item = {"filename": name, "content": b64(content), **({"content_type": declared} if declared else {})}
    assert stored(service, accepted(send(tenant, attachments=[item])))["attachments"][0]["content_type"] == expected


@pytest.mark.parametrize("item, field", [
    ({"filename": "a" * 252 + ".pdf"}, "filename"),                    # 256 bytes
    ({"filename": "é" * 126 + ".pdf"}, "filename"),                    # 256 bytes of UTF-8
    ({"filename": "invoice.pdf\r\nX-Injected: yes"}, "filename"),
    ({"filename": "invoice\x00.pdf"}, "filename"),
    ({"filename": "invoice\u202efdp.exe"}, "filename"),                 # reads "invoiceexe.pdf"
    ({"filename": "../../etc/passwd"}, "filename"),
    ({"filename": "setup.EXE"}, "filename"),
    ({"filename": "=?utf-8?q?setup.exe?="}, "filename"),                # readers would decode it
    ({"filename": "run.js. "}, "filename"),                            # Windows drops the trailing dot
    ({"filename": ""}, "filename"),
    ({"content": "not base64!"}, "content"),
    ({"content": b64(b"MZ\x90\x00program")}, "content"),
    ({"content": b64(b"\x7fELF\x02\x01")}, "content"),
    ({"content": b64(b"#!/bin/sh\nrm -rf /\n"), "filename": "notes.txt"}, "content"),
    ({"content": b64(b"plain text"), "filename": "photo.png"}, "content"),  # the name says PNG, the bytes do not
    ({"content_type": "image/png"}, "content_type"),                   # the bytes are a PDF
    ({"content": b64(b"hello"), "content_type": "application/pdf"}, "content_type"),
    ({"content": b64(b"alert(1)"), "content_type": "application/javascript", "filename": "a.txt"},
     "content_type"),
    ({"content_type": "not a type"}, "content_type"),
    ({"content_id": "<logo>"}, "content_id"),
    ({"content_id": "a b"}, "content_id"),
    ({"content_id": "x" * 101}, "content_id"),
    ({"size": 1}, "size"),                                             # unknown field
])
def test_a_refused_file_names_the_field_at_fault(tenant, item, field):
    assert_error(send(tenant, attachments=[pdf(), {**pdf(), **item}]), 400, "validation_error",
                 f"attachments[1].{field}")


def test_a_bad_file_in_a_batch_names_its_item(tenant):
    items = [{"to": address(), "subject": "Hi", "text": "x"},
             {"to": address(), "subject": "Hi", "text": "x", "attachments": [pdf("tool.bat")]}]
    assert_error(tenant.post("/email/batch", json={"messages": items}), 400, "validation_error",
                 "messages[1].attachments[0].filename")


def test_more_than_20_files_or_two_with_one_content_id_are_refused(tenant):
    assert_error(send(tenant, attachments=[pdf(f"f{i}.pdf") for i in range(21)]), 400, "validation_error",
                 "attachments")
    accepted(send(tenant, attachments=[pdf(f"f{i}.pdf") for i in range(20)]))
    assert_error(send(tenant, attachments=[pdf(content_id="a"), pdf(content_id="cid:a")]), 400,
                 "validation_error", "attachments")


def test_hostile_file_names_that_are_refused_leave_nothing_stored(service, tenant):
    assert_error(send(tenant, attachments=[pdf("a\nb.pdf")]), 400, "validation_error", "attachments[0].filename")
    assert files_stored(service, tenant.workspace_id) == []


# --- headers -------------------------------------------------------------------------------

def test_own_headers_are_stored_in_order(service, tenant):
    headers = {"X-Entity-Ref-ID": "abc-123", "In-Reply-To": "<a@example.org>",
               "References": "<a@example.org> <b@example.org>", "List-Help": "<https://example.org/help>"}
    doc = stored(service, accepted(send(tenant, headers=headers)))
    assert doc["headers"] == [[k, v] for k, v in headers.items()]


@pytest.mark.parametrize("name", ["From", "to", "CC", "Bcc", "Subject", "Date", "Message-ID", "DKIM-Signature",
                                  "List-Unsubscribe", "List-Unsubscribe-Post", "Feedback-ID", "MIME-Version",
                                  "Content-Type", "content-transfer-encoding", "Reply-To", "Sender",
                                  "Return-Path", "Received"])
def test_the_headers_postroom_writes_are_refused_naming_the_header(tenant, name):
    error = assert_error(send(tenant, headers={"X-Fine": "1", name: "x"}), 400, "validation_error",
                         f"headers.{name}")
    assert name in error["message"] and "set by Postroom" in error["message"]


@pytest.mark.parametrize("headers, path", [
    ({"X-Bad": "a\r\nBcc: victim@example.org"}, "headers.X-Bad"),
    ({"X-Bad": "a\nb"}, "headers.X-Bad"),
    ({"X-Bad": "a\x00b"}, "headers.X-Bad"),
    ({"X-Bad": "x" * 999}, "headers.X-Bad"),
    ({"X-Bad": 5}, "headers.X-Bad"),
    ({"X Bad": "1"}, "headers.X Bad"),
    ({"X-Bad:": "1"}, "headers.X-Bad:"),
    ({"X-Über": "1"}, "headers.X-Über"),
    ({"X-A": "1", "x-a": "2"}, "headers.x-a"),
    ({f"X-{i}": "v" for i in range(51)}, "headers"),
    (["X-A", "1"], "headers"),
])
def test_bad_headers_are_refused_with_their_path(tenant, headers, path):
    assert_error(send(tenant, headers=headers), 400, "validation_error", path)


def test_fifty_headers_and_a_998_character_value_are_accepted(tenant):
    accepted(send(tenant, headers={**{f"X-{i}": "v" for i in range(49)}, "X-Long": "y" * 998}))


# --- metadata and tags -----------------------------------------------------------------------

def test_metadata_and_tags_are_stored_with_their_index_form_and_shown_by_status(service, tenant):
    metadata = {"order_id": "A-1001", "customer.tier": "gold"}
    message_id = accepted(send(tenant, metadata=metadata, tags=["receipt", "eu-west"]))
    doc = stored(service, message_id)
    assert doc["metadata"] == metadata and doc["tags"] == ["receipt", "eu-west"]
    assert doc["metadata_pairs"] == ["order_id=A-1001", "customer.tier=gold"]
    status = tenant.get(f"/email/{message_id}/status").json()["data"]
    assert status["metadata"] == metadata and status["tags"] == ["receipt", "eu-west"]


def test_a_message_without_them_shows_empty_ones(service, tenant):
    message_id = accepted(send(tenant))
    status = tenant.get(f"/email/{message_id}/status").json()["data"]
    assert (status["metadata"], status["tags"], status["cc"], status["bcc"], status["attachments"]) == (
        {}, [], [], [], [])


@pytest.mark.parametrize("field, value, path", [
    ("metadata", {f"k{i}": "v" for i in range(11)}, "metadata"),
    ("metadata", {"k" * 41: "v"}, "metadata." + "k" * 41),
    ("metadata", {"bad key": "v"}, "metadata.bad key"),
    ("metadata", {"ok": "v" * 501}, "metadata.ok"),
    ("metadata", {"ok": 5}, "metadata.ok"),
    ("metadata", {"ok": None}, "metadata.ok"),
    ("metadata", ["a=b"], "metadata"),
    ("tags", [f"t{i}" for i in range(6)], "tags"),
    ("tags", ["ok", "not ok"], "tags[1]"),
    ("tags", ["t" * 51], "tags[0]"),
    ("tags", "receipt", "tags"),
])
def test_bad_metadata_and_tags_name_their_path(tenant, field, value, path):
    assert_error(send(tenant, **{field: value}), 400, "validation_error", path)


def test_the_limits_themselves_are_accepted(tenant):
    accepted(send(tenant, metadata={f"{'k' * 38}{i:02d}": "v" * 500 for i in range(10)},
                  tags=[f"{'t' * 49}{i}" for i in range(5)]))


def test_batch_items_take_every_new_field(service, tenant):
    item = {"to": address(), "cc": address("cc"), "bcc": [address("bcc")], "reply_to": [address("r")],
            "subject": "Hi", "text": "x", "attachments": [pdf()], "headers": {"X-Ref": "1"},
            "metadata": {"k": "v"}, "tags": ["t"]}
    response = tenant.post("/email/batch", json={"messages": [item, {**item, "to": address()}]})
    assert response.status_code == 202, response.text
    doc = stored(service, response.json()["data"]["message_ids"][1])
    assert doc["cc"] == [item["cc"]] and doc["bcc"] == item["bcc"] and doc["metadata"] == {"k": "v"}
    assert_error(tenant.post("/email/batch", json={"messages": [item, {**item, "tags": ["a b"]}]}), 400,
                 "validation_error", "messages[1].tags[0]")
