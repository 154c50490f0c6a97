"""Subscription forms over real HTTP: the API resource, and the public submission endpoint
(JSON and form posts) with its abuse guards, double opt-in and events. The browser run of
the hosted page is tests/e2e/test_form_signup.py."""

import re

import httpx
import pytest

from tests.support.api import assert_error
from tests.support.audience import events, make_contact, make_list
from tests.support.forms import confirmation_link, make_form, post_form, post_json, unique_email
from tests.support.polling import wait_until

FIELDS = [{"name": "first_name", "required": True}, {"name": "last_name"},
          {"name": "plan", "type": "text", "label": "Your plan"}, {"name": "seats", "type": "number"},
          {"name": "beta", "type": "boolean"}, {"name": "birthday", "type": "date"}]


def stored_messages(service, tenant, to: str) -> list[dict]:
    """The messages the workspace stored for `to` (what was accepted for sending, or not)."""
    async def read(db):
        return await db.messages.find({"workspace_id": tenant.workspace_id}, {"to": 1, "status": 1}).to_list()
    return [m for m in service.store.run(read) if m["to"] == [to]]


def members(tenant, list_id) -> list[str]:
    return [c["email"] for c in tenant.get(f"/lists/{list_id}/members").json()["data"]]


def contact_by_email(tenant, email):
    found = tenant.get("/contacts", params={"search": email}).json()["data"]
    return found[0] if found else None


# --- the API resource ---------------------------------------------------------------------

@pytest.mark.e2e
def test_a_form_is_created_read_listed_changed_and_deleted(service, tenant):
    news = make_list(tenant, "News")
    form = make_form(tenant, name="Newsletter", list_ids=[news["id"]], fields=FIELDS,
                     redirect_url="https://shop.example/thanks", allowed_origins=["https://Shop.Example/"])
    assert form["double_opt_in"] is True and form["list_ids"] == [news["id"]]
    assert form["title"] == "Newsletter" and form["submit_label"] == "Subscribe"
    assert [f["name"] for f in form["fields"]] == [f["name"] for f in FIELDS]
    assert form["fields"][2] == {"name": "plan", "type": "text", "label": "Your plan", "required": False}
    assert form["fields"][0]["label"] == "First name" and form["fields"][0]["required"] is True
    assert form["allowed_origins"] == ["https://shop.example"]
    assert form["hosted_url"] == f"{service.base_url}/f/{form['id']}" == form["embed"]["action"]
    snippet = form["embed"]["html"]
    assert f'action="{form["hosted_url"]}"' in snippet and form["embed"]["token"] in snippet
    assert '<label for="pr-email">' in snippet and 'name="website"' in snippet

    assert tenant.get(f"/forms/{form['id']}").json()["data"] == form
    listed = tenant.get("/forms").json()
    assert [f["id"] for f in listed["data"]] == [form["id"]] and listed["pagination"]["total"] == 1

    patched = tenant.patch(f"/forms/{form['id']}", json={"title": "Join us", "double_opt_in": False,
                                                         "redirect_url": None})
    assert patched.status_code == 200, patched.text
    changed = patched.json()["data"]
    assert changed["title"] == "Join us" and changed["double_opt_in"] is False and changed["redirect_url"] is None
    assert changed["embed"]["token"] == form["embed"]["token"]

    assert tenant.delete(f"/forms/{form['id']}").json()["data"] == {"id": form["id"], "deleted": True}
    assert_error(tenant.get(f"/forms/{form['id']}"), 404, "not_found")
    assert httpx.get(form["hosted_url"]).status_code == 404


@pytest.mark.parametrize("body, path", [
    ({}, "name"),
    ({"name": "x", "fields": [{"name": "email"}]}, "fields[0].name"),
    ({"name": "x", "fields": [{"name": "website"}]}, "fields[0].name"),
    ({"name": "x", "fields": [{"name": "has space"}]}, "fields[0].name"),
    ({"name": "x", "fields": [{"name": "plan"}, {"name": "plan"}]}, "fields[1].name"),
    ({"name": "x", "fields": [{"name": "first_name", "type": "number"}]}, "fields[0].type"),
    ({"name": "x", "fields": [{"name": "plan", "type": "colour"}]}, "fields[0].type"),
    ({"name": "x", "redirect_url": "javascript:alert(1)"}, "redirect_url"),
    ({"name": "x", "redirect_url": "https://user:pw@shop.example/"}, "redirect_url"),
    ({"name": "x", "confirmed_redirect_url": "/relative"}, "confirmed_redirect_url"),
    # what went into headers: a CSP directive, a second header, a NUL, quotes, a policy list
    ({"name": "x", "redirect_url": "https://a;script-src *.example/"}, "redirect_url"),
    ({"name": "x", "redirect_url": "https://a.example;script-src/"}, "redirect_url"),
    ({"name": "x", "redirect_url": "https://shop.example/x;script-src"}, "redirect_url"),
    ({"name": "x", "redirect_url": "https://shop.example/x\r\nSet-Cookie: a=b"}, "redirect_url"),
    ({"name": "x", "confirmed_redirect_url": "https://shop.example/\x00"}, "confirmed_redirect_url"),
    ({"name": "x", "confirmed_redirect_url": "https://shop.example/\tx"}, "confirmed_redirect_url"),
    ({"name": "x", "redirect_url": "https://shop.example/'unsafe-inline'"}, "redirect_url"),
    ({"name": "x", "redirect_url": 'https://shop.example/"x"'}, "redirect_url"),
    ({"name": "x", "redirect_url": "https://shop.example/a,script-src"}, "redirect_url"),
    ({"name": "x", "allowed_origins": ["https://shop.example/path"]}, "allowed_origins[0]"),
    ({"name": "x", "confirmation_email_subject": "Hi {{#if x}}"}, "confirmation_email_subject"),
    ({"name": "x", "list_ids": None}, "list_ids"),
    ({"name": "x", "double_opt_in": "yes"}, "double_opt_in"),
    ({"name": "x", "colour": "red"}, "colour"),
])
def test_invalid_forms_are_refused_with_their_path(tenant, body, path):
    assert_error(tenant.post("/forms", json=body), 400, "validation_error", path)
    assert tenant.get("/forms").json()["pagination"]["total"] == 0


def test_lists_must_be_static_lists_of_the_workspace(service, tenant):
    dynamic = make_list(tenant, "Dyn", type="dynamic",
                        conditions={"rules": [{"field": "email", "operator": "contains", "value": "@"}]})
    foreign = make_list(service.tenant(), "Theirs")
    assert_error(tenant.post("/forms", json={"name": "x", "list_ids": [foreign["id"]]}), 404, "not_found",
                 "list_ids[0]")
    assert_error(tenant.post("/forms", json={"name": "x", "list_ids": [dynamic["id"]]}), 400,
                 "validation_error", "list_ids[0]")


def test_double_opt_in_needs_a_sender_for_its_confirmation_email(service):
    tenant = service.tenant(from_email=None)
    assert_error(tenant.post("/forms", json={"name": "x"}), 400, "missing_from_email", "double_opt_in")
    assert tenant.post("/forms", json={"name": "x", "double_opt_in": False}).status_code == 201


def test_forms_are_workspace_scoped_and_need_the_forms_permission(service, tenant):
    form = make_form(tenant)
    other = service.tenant()
    assert_error(other.get(f"/forms/{form['id']}"), 404, "not_found")
    assert_error(other.patch(f"/forms/{form['id']}", json={"title": "x"}), 404, "not_found")
    assert_error(other.delete(f"/forms/{form['id']}"), 404, "not_found")
    reader = service.extra_key(tenant, permissions=["forms:read"])
    assert reader.get(f"/forms/{form['id']}").status_code == 200
    assert_error(reader.post("/forms", json={"name": "x"}), 403, "forbidden")
    assert_error(service.extra_key(tenant, permissions=["contacts:*"]).get("/forms"), 403, "forbidden")


# --- the public endpoint ------------------------------------------------------------------

@pytest.mark.e2e
def test_a_single_opt_in_json_submission_subscribes_at_once_with_the_usual_events(service, tenant):
    news = make_list(tenant, "News")
    form = make_form(tenant, list_ids=[news["id"]], fields=FIELDS, double_opt_in=False)
    email = unique_email()
    answer = post_json(form, {"email": email.upper().replace("@FORMS.EXAMPLE", "@Forms.Example"),
                              "first_name": "Ann", "seats": "3", "beta": True, "birthday": "1990-02-03",
                              "unasked": "ignored"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"data": {"status": "confirmed", "message": "Thank you: you are subscribed."}}

    contact = contact_by_email(tenant, email)
    assert contact["first_name"] == "Ann" and contact["subscribed"] is True
    assert contact["attributes"] == {"seats": 3, "beta": True, "birthday": "1990-02-03"}
    assert members(tenant, news["id"]) == [contact["email"]]
    [submitted] = events(service, tenant, "form.submitted")
    assert submitted["data"] == {"form": {"id": form["id"], "name": form["name"]}, "email": contact["email"],
                                 "contact": {"id": contact["id"], "email": contact["email"]},
                                 "fields": {"first_name": "Ann", "seats": 3, "beta": True,
                                            "birthday": "1990-02-03"},
                                 "status": "confirmed"}
    assert [e["data"]["contact"]["id"] for e in events(service, tenant, "contact.created")] == [contact["id"]]
    [joined] = events(service, tenant, "list.member_added")
    [subscribed] = events(service, tenant, "contact.subscribed")
    assert joined["data"]["list"]["id"] == subscribed["data"]["list"]["id"] == news["id"]
    assert subscribed["data"]["reason"] == "form"


@pytest.mark.e2e
def test_double_opt_in_joins_the_lists_only_once_the_emailed_link_is_followed(service, tenant):
    news = make_list(tenant, "News")
    form = make_form(tenant, list_ids=[news["id"]], fields=FIELDS[:2],
                     confirmation_email_subject="Confirm for {{company_name}}")
    email = unique_email()
    page = post_form(form, {"email": email, "first_name": "Bo"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "Check your inbox" in page.text and "we have sent you an email" in page.text
    [pending] = events(service, tenant, "form.submitted")
    assert pending["data"]["status"] == "pending" and pending["data"]["fields"] == {"first_name": "Bo"}
    assert pending["data"]["contact"] is None  # not a contact until confirmed
    assert contact_by_email(tenant, email) is None and members(tenant, news["id"]) == []

    [mail] = service.smtp.wait_for(email)
    assert mail.message["Subject"] == "Confirm for"  # no company name set: the tag renders empty
    link = confirmation_link(mail)
    assert link.startswith(service.base_url + "/f/confirm/") and link in mail.body("plain")
    for _ in range(2):  # a second click changes nothing
        confirmed = httpx.get(link, timeout=30)
        assert confirmed.status_code == 200 and "Subscription confirmed" in confirmed.text
    contact = contact_by_email(tenant, email)
    assert contact["first_name"] == "Bo" and contact["subscribed"] is True
    assert members(tenant, news["id"]) == [email]
    assert len(events(service, tenant, "contact.created")) == 1
    assert len(events(service, tenant, "list.member_added")) == 1
    assert len(events(service, tenant, "form.submitted")) == 1


@pytest.mark.e2e
def test_the_confirmation_email_offers_no_unsubscribe_while_marketing_mail_does(service, tenant):
    form = make_form(tenant, fields=FIELDS[:1])
    email = unique_email("confirm")
    assert post_json(form, {"email": email, "first_name": "Cy"}).json()["data"]["status"] == "pending"
    [confirmation] = service.smtp.wait_for(email)
    assert "List-Unsubscribe" not in confirmation.message and "List-Unsubscribe-Post" not in confirmation.message
    for subtype in ("html", "plain"):
        assert "/f/confirm/" in confirmation.body(subtype)
        assert "unsubscribe" not in confirmation.body(subtype).lower(), subtype

    reader = unique_email("reader")
    sent = tenant.post("/email/send", json={"to": reader, "subject": "News", "html": "<p>Hi</p>", "text": "Hi",
                                            "stream": "marketing"})
    assert sent.status_code == 202, sent.text
    [newsletter] = service.smtp.wait_for(reader)
    assert newsletter.message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert "/u/" in newsletter.message["List-Unsubscribe"]
    assert all("Unsubscribe" in newsletter.body(subtype) for subtype in ("html", "plain"))


@pytest.mark.e2e
def test_the_answer_never_tells_whether_an_address_is_already_known(service, tenant):
    news = make_list(tenant, "News")
    form = make_form(tenant, list_ids=[news["id"]])
    known = make_contact(tenant, unique_email("known"), list_id=news["id"])["email"]
    unsubscribed = make_contact(tenant, unique_email("gone"), subscribed=False)["email"]
    tenant.post("/suppressions", json={"email": (suppressed := unique_email("blocked"))})
    answers = [post_json(form, {"email": e}) for e in (unique_email("new"), known, unsubscribed, suppressed)]
    assert {(a.status_code, a.text) for a in answers} == {(200, answers[0].text)}
    pages = [post_form(form, {"email": e}) for e in (unique_email("new"), known)]
    assert pages[0].status_code == pages[1].status_code == 200 and pages[0].text == pages[1].text
    service.smtp.wait_for(known)  # the owner of a known address gets the confirmation too
    [held] = stored_messages(service, tenant, suppressed)  # decided when accepted: never enqueued
    assert held["status"] == "suppressed"


@pytest.mark.e2e
def test_a_filled_honeypot_gets_the_usual_answer_and_records_nothing(service, tenant):
    form = make_form(tenant, double_opt_in=False)
    bot = post_json(form, {"email": unique_email("bot"), "website": "http://spam.example"})
    human = post_json(form, {"email": (email := unique_email("human"))})
    assert bot.status_code == human.status_code == 200 and bot.json() == human.json()
    [submitted] = events(service, tenant, "form.submitted")  # the later, real one arrived; the bot's never
    assert submitted["data"]["email"] == email
    assert tenant.get("/contacts").json()["pagination"]["total"] == 1


@pytest.mark.e2e
def test_a_missing_forged_or_foreign_token_is_refused(service, tenant):
    form, other = make_form(tenant, double_opt_in=False), make_form(tenant, double_opt_in=False)
    body = {"email": unique_email()}
    token = form["embed"]["token"]
    for bad in ("", token[:-2] + ("AA" if not token.endswith("AA") else "BB"), other["embed"]["token"]):
        assert_error(post_json(form, body, token=bad), 400, "validation_error", "token")
    page = post_form(form, body, token="nope")
    assert page.status_code == 400 and "This form is out of date" in page.text
    assert events(service, tenant, "form.submitted") == []


@pytest.mark.e2e
def test_invalid_answers_are_refused_with_the_field_named(service, tenant):
    form = make_form(tenant, fields=FIELDS, double_opt_in=False)
    cases = [({}, "email"), ({"email": "not-an-address"}, "email"), ({"email": ["a@b.example"]}, "email"),
             ({"email": unique_email()}, "first_name"),
             ({"email": unique_email(), "first_name": "A", "seats": "many"}, "seats"),
             ({"email": unique_email(), "first_name": "A", "seats": True}, "seats"),
             ({"email": unique_email(), "first_name": "A", "beta": "maybe"}, "beta"),
             ({"email": unique_email(), "first_name": "A", "birthday": "03/02/1990"}, "birthday"),
             ({"email": unique_email(), "first_name": "x" * 101}, "first_name")]
    for body, path in cases:
        assert_error(post_json(form, body), 400, "validation_error", path)
    assert_error(httpx.post(form["hosted_url"], content=b"[1]", headers={"Content-Type": "application/json"}),
                 400, "validation_error")
    page = post_form(form, {"email": "someone@forms.example", "first_name": "", "plan": "gold"})
    assert page.status_code == 400
    assert 'role="alert"' in page.text and "First name: this field is required." in page.text
    assert 'value="someone@forms.example"' in page.text and 'value="gold"' in page.text  # answers kept
    assert 'id="pr-first_name"' in page.text and 'aria-invalid="true"' in page.text
    assert events(service, tenant, "form.submitted") == []


@pytest.mark.e2e
def test_every_wrong_answer_is_shown_beside_its_field_with_the_answers_kept(service, tenant):
    form = make_form(tenant, fields=FIELDS, double_opt_in=False)
    typed = {"email": "not-an-address", "first_name": "", "plan": "gold", "seats": "many",
             "birthday": "03/02/1990"}
    page = post_form(form, typed)
    assert page.status_code == 400
    expected = {"email": "Enter a valid email address, like name@example.com.",
                "first_name": "First name: this field is required.",
                "seats": "Seats: must be a number.", "birthday": "Birthday: must be a date (YYYY-MM-DD)."}
    for name, message in expected.items():
        field = re.search(rf'<div class="field">\s*<label for="pr-{name}">.*?</div>', page.text, re.S).group(0)
        assert f'aria-describedby="pr-{name}-error"' in field and 'aria-invalid="true"' in field, name
        assert f'<p class="error" id="pr-{name}-error">{message}</p>' in field, name
        assert f'<a href="#pr-{name}">{message}</a>' in page.text, name  # the summary links to it
    plan = re.search(r'<input id="pr-plan"[^>]*>', page.text).group(0)
    assert 'value="gold"' in plan and "aria-invalid" not in plan
    for name in ("email", "birthday", "seats"):
        assert f'value="{typed[name]}"' in re.search(rf'<input id="pr-{name}"[^>]*>', page.text).group(0)
    assert_error(post_json(form, typed), 400, "validation_error", "email")  # JSON: the first, as the spec's envelope
    assert events(service, tenant, "form.submitted") == []


@pytest.mark.e2e
def test_submissions_are_rate_limited_per_client_address_and_form(service, tenant):
    form, other = make_form(tenant, double_opt_in=False), make_form(tenant, double_opt_in=False)
    limit = 10  # POSTROOM_FORM_SUBMISSIONS_PER_MINUTE's default
    answers = [post_json(form, {"email": "not-an-address"}) for _ in range(limit)]
    assert [a.status_code for a in answers] == [400] * limit  # every try counts, valid or not
    refused = post_json(form, {"email": unique_email()})
    assert_error(refused, 429, "rate_limited")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    page = post_form(form, {"email": unique_email()})
    assert page.status_code == 429 and "Retry-After" in page.headers
    assert post_json(other, {"email": unique_email()}).status_code == 200


@pytest.mark.e2e
def test_an_existing_contact_is_never_overwritten_and_single_opt_in_never_resubscribes(service, tenant):
    form = make_form(tenant, fields=FIELDS[:3], double_opt_in=False)
    known = make_contact(tenant, unique_email("ann"), first_name="Ann", attributes={"plan": "pro"},
                         subscribed=False)
    post_json(form, {"email": known["email"], "first_name": "Eve", "last_name": "Lee", "plan": "free"})
    after = tenant.get(f"/contacts/{known['id']}").json()["data"]
    assert (after["first_name"], after["last_name"], after["attributes"]) == ("Ann", "Lee", {"plan": "pro"})
    assert after["subscribed"] is False


@pytest.mark.e2e
def test_a_confirmed_signup_subscribes_an_unsubscribed_contact_again(service, tenant):
    form = make_form(tenant)
    known = make_contact(tenant, unique_email("back"), subscribed=False)
    post_json(form, {"email": known["email"]})
    [mail] = service.smtp.wait_for(known["email"])
    assert httpx.get(confirmation_link(mail)).status_code == 200
    assert tenant.get(f"/contacts/{known['id']}").json()["data"]["subscribed"] is True
    [back] = [e for e in events(service, tenant, "contact.subscribed") if e["data"]["list"] is None]
    assert back["data"]["reason"] == "form"


@pytest.mark.e2e
def test_one_confirmation_email_per_address_and_form_every_ten_minutes(service, tenant):
    form = make_form(tenant)
    email, later = unique_email("twice"), unique_email("later")
    for _ in range(3):
        assert post_json(form, {"email": email}).status_code == 200
    post_json(form, {"email": later})
    assert len(stored_messages(service, tenant, email)) == 1  # the only one accepted for sending
    service.smtp.wait_for(email)
    assert [e["data"]["email"] for e in events(service, tenant, "form.submitted")] == [email] * 3 + [later]


@pytest.mark.e2e
def test_redirect_urls_replace_our_pages(service, tenant):
    form = make_form(tenant, redirect_url="https://shop.example/check-inbox",
                     confirmed_redirect_url="https://shop.example/welcome")
    email = unique_email()
    answer = post_form(form, {"email": email}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["Location"] == "https://shop.example/check-inbox"
    [mail] = service.smtp.wait_for(email)
    confirmed = httpx.get(confirmation_link(mail), follow_redirects=False)
    assert confirmed.status_code == 303 and confirmed.headers["Location"] == "https://shop.example/welcome"
    hosted = httpx.get(form["hosted_url"])
    assert "form-action 'self' https://shop.example" in hosted.headers["Content-Security-Policy"]


def set_stored(service, form_id: str, **fields) -> None:
    """Write fields straight into the stored form: what a form saved before a check holds."""
    async def write(db):
        await db.forms.update_one({"_id": form_id}, {"$set": fields})
    service.store.run(write)


def contacts_named(service, tenant, email: str) -> list[dict]:
    async def read(db):
        return await db.contacts.find({"workspace_id": tenant.workspace_id, "email": email}).to_list()
    return service.store.run(read)


@pytest.mark.e2e
def test_a_hostile_redirect_url_is_refused_and_one_stored_before_is_never_sent(service, tenant):
    form = make_form(tenant, double_opt_in=False, redirect_url="https://shop.example/thanks")
    hostile = "https://a;script-src *.example/"
    assert_error(tenant.patch(f"/forms/{form['id']}", json={"redirect_url": hostile}), 400, "validation_error",
                 "redirect_url")
    # saved before the check existed: the page's CSP gains nothing, the post never answers 500
    set_stored(service, form["id"], redirect_url=hostile, confirmed_redirect_url="https://shop.example/x\r\nA: b")
    page = httpx.get(form["hosted_url"])
    assert page.status_code == 200
    policy = page.headers["Content-Security-Policy"]
    assert "script-src" not in policy and "*.example" not in policy
    assert policy == ("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                      "frame-ancestors 'none'")
    email = unique_email()
    answer = post_form(form, {"email": email}, follow_redirects=False)
    assert answer.status_code == 200 and "You are subscribed" in answer.text, answer.text  # our own page
    assert len(contacts_named(service, tenant, email)) == 1
    set_stored(service, form["id"], redirect_url="https://shop.example/x\r\nSet-Cookie: a=b")
    again = unique_email()
    assert post_form(form, {"email": again}, follow_redirects=False).status_code == 200
    # a submission that fails answers 400 with the form again, and creates nothing
    refused = post_form(form, {"email": "not an address"}, follow_redirects=False)
    assert refused.status_code == 400
    assert contacts_named(service, tenant, "not an address") == []
    assert [c["email"] for c in (contacts_named(service, tenant, email) + contacts_named(service, tenant, again))] \
        == [email, again]


@pytest.mark.e2e
def test_the_csp_names_only_the_redirect_origin(tenant):
    form = make_form(tenant, redirect_url="https://Shop.Example:8443/thanks?from=form#top")
    policy = httpx.get(form["hosted_url"]).headers["Content-Security-Policy"]
    assert "form-action 'self' https://shop.example:8443;" in policy
    assert policy.count(";") == 3


@pytest.mark.e2e
def test_scripts_of_allowed_origins_may_read_the_answer(tenant):
    form = make_form(tenant, double_opt_in=False, allowed_origins=["https://shop.example"])
    preflight = httpx.request("OPTIONS", form["hosted_url"], headers={
        "Origin": "https://shop.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://shop.example"
    assert "Content-Type" in preflight.headers["Access-Control-Allow-Headers"]
    allowed = post_json(form, {"email": unique_email()}, Origin="https://shop.example")
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://shop.example"
    refused = post_json(form, {"email": "bad"}, Origin="https://evil.example")
    assert refused.status_code == 400 and "Access-Control-Allow-Origin" not in refused.headers
    other = httpx.request("OPTIONS", form["hosted_url"], headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers


@pytest.mark.e2e
def test_an_unconfirmed_signup_expires_and_is_deleted(service, tenant):
    form = make_form(tenant)
    email = unique_email("late")
    post_json(form, {"email": email})
    [mail] = service.smtp.wait_for(email)

    async def age(db):
        await db.form_signups.update_one({"form_id": form["id"]},
                                         {"$set": {"expires_at": "2000-01-01T00:00:00.000000Z",
                                                   "expires_ms": 0}})  # the integer the scheduler ranges over
    service.store.run(age)
    expired = httpx.get(confirmation_link(mail))
    assert expired.status_code == 410 and "expired" in expired.text

    async def left(db):
        return await db.form_signups.count_documents({"form_id": form["id"]})
    wait_until(lambda: service.store.run(left) == 0, what="the scheduler deleting the expired signup")
    assert httpx.get(confirmation_link(mail)).status_code == 410
    assert contact_by_email(tenant, email) is None
    assert [e["data"]["status"] for e in events(service, tenant, "form.submitted")] == ["pending"]


@pytest.mark.e2e
def test_unknown_forms_and_tampered_links_answer_404(service):
    assert httpx.get(service.base_url + "/f/nope").status_code == 404
    assert_error(httpx.post(service.base_url + "/f/nope", json={"email": "a@b.example"}), 404, "not_found")
    page = httpx.get(service.base_url + "/f/confirm/abc.def")
    assert page.status_code == 404 and "not valid" in page.text


@pytest.mark.e2e
def test_the_hosted_page_is_a_plain_labelled_form(tenant):
    form = make_form(tenant, fields=FIELDS, title="Join the club", description="Monthly news.")
    page = httpx.get(form["hosted_url"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<script" not in page.text and '<html lang="en">' in page.text
    assert f'<form method="post" action="/f/{form["id"]}">' in page.text
    for field in ["email", *(f["name"] for f in FIELDS)]:
        assert re.search(rf'<label for="pr-{field}">', page.text), field
        assert f'id="pr-{field}"' in page.text
    assert 'name="token" value="' + form["embed"]["token"] + '"' in page.text
    assert 'tabindex="-1"' in page.text and "Leave this field empty" in page.text
    assert page.headers["Cache-Control"].startswith("no-store")
