"""The pages a recipient opens from an email, in a real headless Chromium (Playwright):
one-click unsubscribe, preferences; and the RFC 8058 one-click POST a mailbox provider
makes. The links come from emails received by the SMTP sink."""

import json
import re
import uuid

import httpx

from pipelines.messages import links
from tests.support.audience import events, make_contact, make_list
from tests.support.campaigns import make_campaign, make_template, send, wait_until

TEMPLATE = ('<html><body><p>Hello {{first_name}}</p>'
            '<p><a href="{{unsubscribe_url}}">Unsubscribe</a> · <a href="{{preferences_url}}">Preferences</a></p>'
            '</body></html>')


def received_campaign_email(service, tenant, *lists):
    """A contact in `lists` (names) gets a campaign; returns (contact, list docs, email)."""
    docs = [make_list(tenant, name) for name in lists]
    contact = make_contact(tenant, f"reader-{uuid.uuid4().hex[:8]}@pages.example", first_name="Pia",
                           list_id=docs[0]["id"])
    for extra in docs[1:]:
        tenant.post(f"/lists/{extra['id']}/members", json={"contact_ids": [contact["id"]]})
    campaign = make_campaign(tenant, template_id=make_template(tenant, TEMPLATE)["id"], list_id=docs[0]["id"])
    assert send(tenant, campaign["id"]).status_code == 202
    [received] = service.smtp.wait_for(contact["email"])
    return contact, docs, campaign, received


def link(received, path):
    return re.search(rf'href="([^"]+/{path}/[^"]+)"', received.body("html")).group(1)


def unsubscribe_reasons(tenant, email):
    return [s["reason"] for s in tenant.get("/suppressions").json()["data"] if s["email"] == email]


def test_unsubscribe_from_a_real_email_with_the_keyboard_in_a_browser(service, tenant, browser, tmp_path):
    contact, _, campaign, received = received_campaign_email(service, tenant, "News")
    page = browser.new_page()
    response = page.goto(link(received, "u"))
    assert response.status == 200
    assert page.locator("html").get_attribute("lang") == "en"
    assert "Unsubscribe" in page.title()
    assert page.get_by_role("heading", level=1).inner_text() == "Unsubscribe"
    assert contact["email"] in page.inner_text("main")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Unsubscribe"
    page.keyboard.press("Enter")
    page.wait_for_selector("text=You have been unsubscribed")
    workspace_name = page.title().split(" · ")[-1]
    assert page.get_by_role("status").inner_text().endswith(
        f"will no longer receive marketing emails from {workspace_name}.")
    assert_visibly_rendered(page, tmp_path / "unsubscribed.png",
                            page.get_by_role("heading", level=1), page.get_by_role("status"))
    page.close()

    assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["subscribed"] is False
    assert unsubscribe_reasons(tenant, contact["email"]) == ["unsubscribe"]
    [event] = events(service, tenant, "contact.unsubscribed")
    assert event["data"]["contact"]["id"] == contact["id"]
    stats = tenant.get(f"/campaigns/{campaign['id']}").json()["data"]
    assert stats["stats"]["unsubscribed"] == 1 and stats["rates"]["unsubscribe_rate"] == 1.0


def assert_visibly_rendered(page, path, *elements):
    """A screenshot in which each element is really drawn: inside its box the pixels show
    contrast (text or a control on its background), not an empty or blank area."""
    from PIL import Image
    page.screenshot(path=str(path), full_page=True)
    image = Image.open(path).convert("L")
    assert image.width >= 320 and image.height >= 200, image.size
    assert image.getextrema()[1] - image.getextrema()[0] > 100, "a blank page"
    for element in elements:
        box = element.bounding_box()
        assert box and box["width"] >= 8 and box["height"] >= 8, (element, box)
        area = image.crop((int(box["x"]), int(box["y"]), int(box["x"] + box["width"]),
                           int(box["y"] + box["height"])))
        darkest, lightest = area.getextrema()
        assert lightest - darkest > 80, (element, "drawn without visible contrast", (darkest, lightest))


def test_preferences_show_the_lists_and_save_changes_in_a_browser(service, tenant, browser, tmp_path):
    contact, (news, offers), _, received = received_campaign_email(service, tenant, "Weekly news", "Offers")
    page = browser.new_page()
    page.goto(link(received, "p"))
    assert page.get_by_role("heading", level=1).inner_text() == "Email preferences"
    assert page.get_by_label("Weekly news").is_checked() and page.get_by_label("Offers").is_checked()
    assert page.get_by_label(re.compile("Receive emails from")).is_checked()
    page.get_by_text("Offers").click()  # the label toggles its checkbox
    assert not page.get_by_label("Offers").is_checked()
    page.get_by_role("button", name="Save preferences").click()
    page.wait_for_selector("text=Your preferences have been saved.")
    assert not page.get_by_label("Offers").is_checked(), "a list left is still offered, unticked"
    assert_visibly_rendered(page, tmp_path / "preferences.png", page.get_by_role("heading", level=1),
                            page.get_by_label("Weekly news"), page.get_by_role("button", name="Save preferences"))
    lists = [item["id"] for item in tenant.get(f"/contacts/{contact['id']}").json()["data"]["lists"]]
    assert lists == [news["id"]]

    page.get_by_label("Offers").check()
    page.get_by_label(re.compile("Receive emails from")).uncheck()
    page.get_by_role("button", name="Save preferences").click()
    page.wait_for_selector("text=Your preferences have been saved.")
    page.close()
    after = tenant.get(f"/contacts/{contact['id']}").json()["data"]
    assert sorted(item["id"] for item in after["lists"]) == sorted([news["id"], offers["id"]])
    assert after["subscribed"] is False
    assert unsubscribe_reasons(tenant, contact["email"]) == ["unsubscribe"]


def test_rfc_8058_one_click_post_unsubscribes_without_a_page_and_only_once(service, tenant):
    contact, _, campaign, received = received_campaign_email(service, tenant, "Digest")
    header = received.message["List-Unsubscribe"]
    url = re.search(r"<(http[^>]+)>", header).group(1)
    assert received.message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    with httpx.Client(timeout=10) as provider:
        for _ in range(2):
            answer = provider.post(url, content=b"List-Unsubscribe=One-Click",
                                   headers={"Content-Type": "application/x-www-form-urlencoded"})
            assert answer.status_code == 200
    assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["subscribed"] is False
    assert len(events(service, tenant, "contact.unsubscribed")) == 1
    assert unsubscribe_reasons(tenant, contact["email"]) == ["unsubscribe"]
    assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["stats"]["unsubscribed"] == 1
    with httpx.Client(timeout=10) as reader:
        again = reader.get(url)
        assert again.status_code == 200 and "already unsubscribed" in again.text


def test_tampered_or_misused_tokens_get_a_404_page_and_change_nothing(service, tenant):
    contact, _, _, received = received_campaign_email(service, tenant, "Guarded")
    unsubscribe, preferences = link(received, "u"), link(received, "p")
    base, token = unsubscribe.rsplit("/", 1)
    forged = base + "/" + token[:40] + token[40:][::-1]  # the sealed token with its end reversed
    with httpx.Client(timeout=10) as client:
        for url in (forged, preferences.replace("/p/", "/u/"), unsubscribe.replace("/u/", "/p/"),
                    unsubscribe.rsplit("/", 1)[0] + "/not-a-token"):
            page = client.get(url)
            assert page.status_code == 404 and "Link not valid" in page.text
            assert page.headers["content-type"].startswith("text/html")
            assert client.post(url, data={"List-Unsubscribe": "One-Click"}).status_code == 404
    assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["subscribed"] is True
    assert unsubscribe_reasons(tenant, contact["email"]) == []


def test_the_token_is_bound_to_its_workspace(service, tenant):
    contact, _, _, received = received_campaign_email(service, tenant, "Bound")
    other = service.tenant()
    make_contact(other, contact["email"])
    with httpx.Client(timeout=10) as client:
        assert client.post(link(received, "u"), data={"List-Unsubscribe": "One-Click"}).status_code == 200
    mine = tenant.get(f"/contacts/{contact['id']}").json()["data"]
    theirs = other.get("/contacts", params={"search": contact["email"]}).json()["data"]
    assert mine["subscribed"] is False
    assert [c["subscribed"] for c in theirs] == [True]
    wait_until(lambda: unsubscribe_reasons(tenant, contact["email"]) == ["unsubscribe"])
    assert unsubscribe_reasons(other, contact["email"]) == []


def test_mailing_the_list_unsubscribe_address_unsubscribes_the_recipient(service, tenant):
    import asyncio
    import concurrent.futures
    from email.message import EmailMessage

    import aiosmtplib
    contact, _, campaign, received = received_campaign_email(service, tenant, "By mail")
    mailto = re.search(r"<mailto:([^>]+)>", received.message["List-Unsubscribe"]).group(1)
    request = EmailMessage()
    request["From"], request["To"], request["Subject"] = contact["email"], mailto, "unsubscribe"
    request.set_content("unsubscribe")
    port = int(service.env["POSTROOM_INBOUND_PORT"])
    # its own thread: the module's Playwright keeps an event loop running on this one
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, aiosmtplib.send(request, hostname="127.0.0.1", port=port)).result()
    assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["subscribed"] is False
    assert unsubscribe_reasons(tenant, contact["email"]) == ["unsubscribe"]
    assert tenant.get(f"/campaigns/{campaign['id']}").json()["data"]["stats"]["unsubscribed"] == 1


def two_recipient_email(service, tenant):
    """A transactional email to two contacts, each in a list of their own; returns
    (first contact, second contact, first's list, the email as the second received it)."""
    tag = uuid.uuid4().hex[:8]
    team, private = make_list(tenant, "Team updates"), make_list(tenant, "Private offers")
    first = make_contact(tenant, f"first-{tag}@pages.example", first_name="Ann", list_id=team["id"])
    second = make_contact(tenant, f"second-{tag}@pages.example", first_name="Bob", list_id=private["id"])
    sent = tenant.post("/email/send", json={"to": [first["email"], second["email"]], "subject": "Minutes",
                                            "html": TEMPLATE})
    assert sent.status_code == 202, sent.text
    [received] = service.smtp.wait_for(second["email"])
    return first, second, team, received


def token_payload(service, url, purpose):
    """What a sealed link carries, opened with the service's secret (nobody else can)."""
    return links.verify(purpose, url.rsplit("/", 1)[1], service.env["POSTROOM_SECRET_KEY"])


def test_a_two_recipient_email_links_name_neither_and_only_the_chosen_second_address_is_unsubscribed(
        service, tenant, browser):
    first, second, _, received = two_recipient_email(service, tenant)
    unsubscribe = link(received, "u")
    for url, purpose in ((unsubscribe, "unsubscribe"), (link(received, "p"), "preferences")):
        payload = token_payload(service, url, purpose)
        assert payload["c"] is None and payload["e"] is None and payload["m"]
        assert first["id"] not in json.dumps(payload) and first["email"] not in json.dumps(payload)

    page = browser.new_page()
    assert page.goto(unsubscribe).status == 200
    assert page.get_by_role("heading", level=1).inner_text() == "Unsubscribe"
    assert page.get_by_role("radio").count() == 2
    page.get_by_label(second["email"]).check()
    page.get_by_role("button", name="Unsubscribe").click()
    page.wait_for_selector("text=You have been unsubscribed")
    assert second["email"] in page.get_by_role("status").inner_text()
    page.close()

    assert tenant.get(f"/contacts/{second['id']}").json()["data"]["subscribed"] is False
    assert tenant.get(f"/contacts/{first['id']}").json()["data"]["subscribed"] is True
    assert unsubscribe_reasons(tenant, second["email"]) == ["unsubscribe"]
    assert unsubscribe_reasons(tenant, first["email"]) == []


def test_a_two_recipient_link_refuses_any_address_that_is_not_a_recipient(service, tenant):
    first, _, _, received = two_recipient_email(service, tenant)
    outsider = make_contact(tenant, f"outsider-{uuid.uuid4().hex[:8]}@pages.example")
    with httpx.Client(timeout=10) as client:
        for form in ({"email": outsider["email"]}, {}, {"List-Unsubscribe": "One-Click"},
                     {"email": first["email"].upper()}):
            answer = client.post(link(received, "u"), data=form)
            assert answer.status_code == 400 and "Choose one of the addresses below." in answer.text
            assert client.post(link(received, "p"), data=form).status_code == 400
    for contact in (first, outsider):
        assert tenant.get(f"/contacts/{contact['id']}").json()["data"]["subscribed"] is True
    assert unsubscribe_reasons(tenant, outsider["email"]) == []


def test_a_two_recipient_preferences_link_asks_for_the_address_then_shows_its_own_preferences(
        service, tenant, browser):
    first, second, team, received = two_recipient_email(service, tenant)
    page = browser.new_page()
    page.goto(link(received, "p"))
    assert page.get_by_role("heading", level=1).inner_text() == "Email preferences"
    assert "preferences are kept for each address on its own" in page.inner_text("main")
    assert page.get_by_role("checkbox").count() == 0, "no address's lists before one is chosen"
    page.get_by_label(first["email"]).check()
    page.get_by_role("button", name="Continue").click()
    page.wait_for_selector("text=Save preferences")
    assert first["email"] in page.inner_text("main") and second["email"] not in page.inner_text("main")
    assert page.get_by_label("Team updates").is_checked()
    assert page.get_by_label("Private offers").count() == 0
    page.close()
