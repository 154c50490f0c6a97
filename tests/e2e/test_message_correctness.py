"""Mail as a deliverability engineer checks it, through the real front, RabbitMQ, the
render and send actors and a real SMTP receiver: caller text never becomes a header,
every signature verifies with dkimpy against the records `postroom dkim` publishes,
campaign mail carries Feedback-ID and List-Id, a marketing unsubscribe does not stop a
password reset, the postal address stays in marketing mail, and the links in mail are
opaque."""

import base64
import email
import email.policy
import re
import uuid

import dkim as dkimpy
import httpx
import pytest

from tests.support.api import assert_error
from tests.support.audience import make_contact, make_list
from tests.support.campaigns import make_campaign, make_template, send
from tests.support.dkim_dns import dnsfunc_for, publish_service_zone
from tests.support.polling import wait_status, wait_until

INJECTION = "=?utf-8?q?Invoice=0D=0AX-Injected:_yes=0D=0AFrom:_ceo@bank.example?= 42"
OWN_LINK_TEMPLATE = ('<html><body><p>Hi {{first_name|there}}</p>'
                     '<p><a href="{{unsubscribe_url}}">Leave this list</a></p></body></html>')


def address(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}@correct.example"


@pytest.fixture
def verify_dkim(service, dns_server):
    publish_service_zone(service, dns_server)
    dnsfunc = dnsfunc_for(dns_server)
    return lambda data: dkimpy.verify(data, dnsfunc=dnsfunc)


def strict(received):
    return email.message_from_bytes(received.data, policy=email.policy.strict)


def campaign_to(tenant, contacts, template=OWN_LINK_TEMPLATE, **fields):
    members = make_list(tenant, f"l-{uuid.uuid4().hex[:6]}")
    made = [make_contact(tenant, email, list_id=members["id"], **extra) for email, extra in contacts]
    campaign = make_campaign(tenant, template_id=make_template(tenant, template)["id"], list_id=members["id"],
                             **fields)
    assert send(tenant, campaign["id"]).status_code == 202
    return campaign, made


def sent(tenant, **body):
    response = tenant.post("/email/send", json=body)
    assert response.status_code == 202, response.text
    return response.json()["data"]["message_id"]


def test_the_issues_injection_arrives_as_text_through_subject_template_data_and_a_contact_name(
        service, tenant, verify_dkim):
    by_subject, by_data, by_contact, hebrew = (address(p) for p in ("subject", "data", "contact", "hebrew"))
    sent(tenant, to=by_subject, subject=INJECTION, from_name=INJECTION, html="<p>Invoice</p>")
    sent(tenant, to=by_data, subject="Re: {{detail}}", template_data={"detail": INJECTION}, html="<p>x</p>")
    sent(tenant, to=hebrew, subject="שלום עולם", from_name="צוות האתר", text="x")
    campaign_to(tenant, [(by_contact, {"first_name": INJECTION})], subject="Hi {{first_name}}")

    for rcpt, subject in ((by_subject, INJECTION), (by_data, "Re: " + INJECTION),
                          (by_contact, "Hi " + INJECTION), (hebrew, "שלום עולם")):
        [received] = service.smtp.wait_for(rcpt)
        msg = strict(received)
        assert msg["X-Injected"] is None and len(msg.get_all("From")) == 1 and len(msg.get_all("Subject")) == 1
        assert msg["Subject"] == subject  # a literal =?…?= arrives as written; spaces kept
        assert msg.get_body(("plain",)) is not None  # no encoded blank line cut the headers short
        assert verify_dkim(received.data)
    [received] = service.smtp.wait_for(by_subject)
    assert strict(received)["From"].addresses[0].display_name == INJECTION
    [received] = service.smtp.wait_for(hebrew)
    assert strict(received)["From"].addresses[0].display_name == "צוות האתר"


def test_campaign_mail_carries_a_signed_feedback_id_and_list_id(service, tenant, verify_dkim):
    rcpt = address("list")
    campaign, _ = campaign_to(tenant, [(rcpt, {})])
    [received] = service.smtp.wait_for(rcpt)
    msg = strict(received)
    assert msg["Feedback-ID"] == f"{campaign['id']}:{tenant.workspace_id}:marketing:postroom"
    assert msg["List-Id"] == f"<{tenant.workspace_id}.postroom.test>"
    signed = re.sub(r"\s", "", re.search(r"h=([^;]+);", msg["DKIM-Signature"]).group(1)).split(":")
    assert {"feedback-id", "list-id", "list-unsubscribe", "from", "subject"} <= set(signed)
    assert verify_dkim(received.data)
    # a List-Id added on the way does not keep our signature (every signed name is oversigned)
    head, body = received.data.split(b"\r\n\r\n", 1)
    assert not verify_dkim(head + b"\r\nList-Id: <other.example>\r\n\r\n" + body)

    receipt = address("receipt")
    sent(tenant, to=receipt, subject="Your receipt", text="Thanks")
    [received] = service.smtp.wait_for(receipt)
    assert received.message["Feedback-ID"] == f"api:{tenant.workspace_id}:transactional:postroom"
    assert received.message["List-Id"] is None and received.message["List-Unsubscribe"] is None


def test_a_marketing_unsubscribe_holds_back_marketing_mail_but_not_a_password_reset(service, tenant):
    reader = address("reader")
    campaign_to(tenant, [(reader, {})], template="<p>News</p>")
    [received] = service.smtp.wait_for(reader)
    one_click = re.search(r"<(http[^>]+/u/[^>]+)>", received.message["List-Unsubscribe"]).group(1)
    assert httpx.post(one_click, content=b"List-Unsubscribe=One-Click",
                      headers={"Content-Type": "application/x-www-form-urlencoded"}).status_code == 200
    [entry] = [s for s in tenant.get("/suppressions").json()["data"] if s["email"] == reader]
    assert entry["reason"] == "unsubscribe"

    reset = tenant.post("/email/send", json={"to": reader, "subject": "Reset your password", "text": "Code 1234"})
    assert reset.status_code == 202 and reset.json()["data"]["suppressed_recipients"] == []
    wait_status(tenant, reset.json()["data"]["message_id"], "delivered")
    assert [m.message["Subject"] for m in service.smtp.messages_to(reader)][-1] == "Reset your password"

    newsletter = tenant.post("/email/send", json={"to": reader, "subject": "Sale", "text": "x", "stream": "marketing"})
    assert newsletter.status_code == 200 and newsletter.json()["data"]["status"] == "suppressed"

    # bounces, complaints and manual entries hold back both streams
    for reason in ("hard_bounce", "complaint", "manual"):
        blocked = address(reason)
        assert tenant.post("/suppressions", json={"email": blocked, "reason": reason}).status_code == 201
        for stream in ("transactional", "marketing"):
            answer = tenant.post("/email/send", json={"to": blocked, "subject": "Hi", "text": "x", "stream": stream})
            assert answer.status_code == 200 and answer.json()["data"]["suppressed_recipients"] == [blocked]


def test_transactional_mail_leaves_out_the_footer_only_when_asked(service, tenant):
    default, bare = address("default"), address("bare")
    sent(tenant, to=default, subject="Receipt", html="<p>Paid</p>")
    sent(tenant, to=bare, subject="Reset", html="<p>Code 1234</p>", text="Code 1234", footer=False)
    [with_footer] = service.smtp.wait_for(default)
    assert "/u/" in with_footer.body("html") and "/p/" in with_footer.body("plain")  # rule 9, as the spec asks
    [without] = service.smtp.wait_for(bare)
    for part in ("html", "plain"):
        assert "/u/" not in without.body(part) and "/p/" not in without.body(part)
    assert_error(tenant.post("/email/send", json={"to": bare, "subject": "x", "text": "x", "stream": "marketing",
                                           "footer": False}), 400, "validation_error", "footer")
    assert_error(tenant.post("/email/batch", json={"messages": [{"to": bare, "subject": "x", "text": "x",
                                                          "stream": "marketing", "footer": False}]}),
          400, "validation_error", "messages[0].footer")
    assert_error(tenant.post("/email/send", json={"to": bare, "subject": "x", "text": "x", "stream": "bulk"}),
          400, "validation_error", "stream")


def test_the_postal_address_stays_in_campaign_mail_that_places_its_own_unsubscribe_link(service):
    tenant = service.tenant(settings={"company_name": "Acme & Co",
                                      "company_address": "1 Main Street\nSuite 5\nSpringfield 12345"})
    rcpt = address("postal")
    campaign_to(tenant, [(rcpt, {"first_name": "Ann"})])
    [received] = service.smtp.wait_for(rcpt)
    html, text = received.body("html"), received.body("plain").replace("\r\n", "\n")
    assert html.count("/u/") == 1  # the template's own link; no second footer
    assert "Acme &amp; Co<br>1 Main Street<br>Suite 5<br>Springfield 12345" in html
    assert "Acme & Co\n1 Main Street\nSuite 5\nSpringfield 12345\n" in text


def test_links_in_mail_are_opaque_and_unsubscribe_in_one_click(service, tenant):
    rcpt = address("opaque")
    campaign, [contact] = campaign_to(tenant, [(rcpt, {})], track_clicks=True,
                                      template='<p><a href="https://shop.example/x">Shop</a> '
                                               '<a href="{{unsubscribe_url}}">Leave</a></p>')
    [received] = service.smtp.wait_for(rcpt)
    tokens = re.findall(r"/(?:u|p|t/c|t/o)/([\w\-]+)", received.body("html"))
    assert len(tokens) >= 3
    for token in tokens:
        decoded = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        for secret in (rcpt.encode(), contact["id"].encode(), tenant.workspace_id.encode(), b"shop.example"):
            assert secret not in decoded
    unsubscribe_url = re.search(r'href="([^"]+/u/[^"]+)"', received.body("html")).group(1)
    page = httpx.get(unsubscribe_url)
    assert page.status_code == 200 and rcpt in page.text

    assert httpx.post(unsubscribe_url, data={"List-Unsubscribe": "One-Click"}).status_code == 200
    assert wait_until(lambda: tenant.get(f"/contacts/{contact['id']}").json()["data"]["subscribed"] is False)
