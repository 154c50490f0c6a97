"""A person signs up through a form's hosted page in a real headless Chromium, with the
keyboard and with JavaScript off: fill, submit, receive the confirmation mail at the SMTP
sink, follow its link, land subscribed in the form's list."""

import re

from tests.e2e.test_recipient_pages import assert_visibly_rendered
from tests.support.audience import events, make_list
from tests.support.forms import confirmation_link, make_form, unique_email

FIELDS = [{"name": "first_name", "required": True}, {"name": "company", "label": "Company"},
          {"name": "newsletter_weekly", "type": "boolean", "label": "Also send the weekly digest"}]


def test_sign_up_with_the_keyboard_and_no_javascript_then_confirm_from_the_email(service, tenant, browser,
                                                                                 tmp_path):
    news = make_list(tenant, "Monthly news")
    form = make_form(tenant, title="Join our newsletter", list_ids=[news["id"]], fields=FIELDS,
                     description="One email a month, no more.")
    email = unique_email("browser")
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    assert page.goto(form["hosted_url"]).status == 200
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.get_by_role("heading", level=1).inner_text() == "Join our newsletter"
    assert_visibly_rendered(page, tmp_path / "form.png", page.get_by_role("heading", level=1),
                            page.get_by_label("Email address"), page.get_by_role("button", name="Subscribe"))

    # keyboard only: Tab reaches every field in order (never the hidden honeypot), then the button
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "pr-email"
    page.keyboard.type(email)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "pr-first_name"
    page.keyboard.type("Pia")
    page.keyboard.press("Tab")
    page.keyboard.type("Initech")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "pr-newsletter_weekly"
    page.keyboard.press("Space")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Subscribe"
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Check your inbox")
    assert "we have sent you an email" in page.get_by_role("status").inner_text()
    assert [e["data"]["status"] for e in events(service, tenant, "form.submitted")] == ["pending"]
    assert tenant.get(f"/lists/{news['id']}/members").json()["data"] == []

    [mail] = service.smtp.wait_for(email)
    assert mail.message["Subject"] == "Please confirm your subscription"
    page.goto(confirmation_link(mail))
    assert page.get_by_role("heading", level=1).inner_text() == "Subscription confirmed"
    assert_visibly_rendered(page, tmp_path / "confirmed.png", page.get_by_role("heading", level=1),
                            page.get_by_role("status"))
    context.close()

    [member] = tenant.get(f"/lists/{news['id']}/members").json()["data"]
    assert member["email"] == email and member["subscribed"] is True
    assert member["first_name"] == "Pia"
    assert member["attributes"] == {"company": "Initech", "newsletter_weekly": True}
    assert [e["data"]["contact"]["email"] for e in events(service, tenant, "contact.created")] == [email]
    assert [e["data"]["list"]["id"] for e in events(service, tenant, "list.member_added")] == [news["id"]]


def test_a_mistake_is_shown_with_its_field_and_the_answers_are_kept(service, tenant, browser):
    form = make_form(tenant, fields=FIELDS, double_opt_in=False)
    page = browser.new_context(java_script_enabled=False).new_page()
    page.goto(form["hosted_url"])
    # the browser's own check accepts an address without a dot in its domain; ours does not
    page.get_by_label("Email address").fill("pia@example")
    page.get_by_label(re.compile("^First name")).fill("Pia")
    page.get_by_role("button", name="Subscribe").click()
    alert = page.get_by_role("alert")
    assert "Enter a valid email address" in alert.inner_text()
    assert page.get_by_label("Email address").get_attribute("aria-invalid") == "true"
    assert page.get_by_label(re.compile("^First name")).input_value() == "Pia"
    alert.get_by_role("link").click()  # the summary's link leads to the field
    assert page.url.endswith("#pr-email")

    page.get_by_label("Email address").fill(email := unique_email("fixed"))
    page.get_by_role("button", name="Subscribe").click()
    page.wait_for_selector("text=You are subscribed")
    assert tenant.get("/contacts", params={"search": email}).json()["data"][0]["first_name"] == "Pia"
