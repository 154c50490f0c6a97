"""Rendering one stored message: whose links a recipient gets."""

import email
import email.policy
import re

from pipelines.core.settings import Settings
from pipelines.messages import links
from pipelines.templates.personalise import stored_template_data
from pipelines.templates.render_message import RenderContext, render_one

SETTINGS = Settings(secret_key="k", base_url="https://mail.example")
ANN = {"_id": "c-ann", "workspace_id": "w1", "email": "ann@x.test", "first_name": "Ann"}


def message(to):
    return {"_id": "msg_1", "workspace_id": "w1", "kind": "transactional", "to": to, "subject": "Hi",
            "html": "<p>Hi {{first_name}}</p>", "text": None, "from_address": "news@postroom.test",
            "from_name": "News", "reply_to": None, "track_opens": False, "track_clicks": False}


def html_body(rendered) -> str:
    parsed = email.message_from_bytes(rendered["data"].encode(), policy=email.policy.default)
    return parsed.get_body(("html",)).get_content()


def link_payload(rendered, purpose, path):
    token = re.search(rf"https://mail\.example/{path}/([\w\-]+)", html_body(rendered)).group(1)
    return links.verify(purpose, token, SETTINGS.secret_key)


def render(to):
    ctx = RenderContext(settings=SETTINGS, workspaces={"w1": {"_id": "w1", "name": "W"}},
                        contacts={("w1", "ann@x.test"): ANN})
    return render_one(message(to), ctx)


def test_a_single_recipient_gets_links_naming_their_contact_and_address():
    rendered = render(["ann@x.test"])
    assert link_payload(rendered, "unsubscribe", "u") == {"w": "w1", "c": "c-ann", "e": "ann@x.test", "m": "msg_1"}


def test_a_message_to_two_addresses_carries_links_that_name_neither_recipient():
    rendered = render(["ann@x.test", "bob@x.test"])
    for purpose, path in (("unsubscribe", "u"), ("preferences", "p")):
        payload = link_payload(rendered, purpose, path)
        assert payload == {"w": "w1", "c": None, "e": None, "m": "msg_1"}
        assert links.names_message_only(payload)
    assert "ann@x.test" not in html_body(rendered)


def render_doc(overrides, settings=None, **ctx_fields):
    ctx = RenderContext(settings=SETTINGS, workspaces={"w1": {"_id": "w1", "name": "W", "settings": settings or {}}},
                        contacts={("w1", "ann@x.test"): ANN}, **ctx_fields)
    rendered = render_one({**message(["ann@x.test"]), **overrides}, ctx)
    return rendered, email.message_from_bytes(rendered["data"].encode(), policy=email.policy.default)


def test_campaign_mail_carries_feedback_id_list_id_and_one_click_unsubscribe():
    _, msg = render_doc({"kind": "campaign", "campaign_id": "camp-1", "contact_id": "c-ann",
                         "signing_domain": "news.acme.example"})
    assert msg["Feedback-ID"] == "camp-1:w1:marketing:postroom"
    assert msg["List-Id"] == "<w1.news.acme.example>"
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_transactional_mail_carries_a_feedback_id_and_no_list_headers():
    _, msg = render_doc({})
    assert msg["Feedback-ID"] == "api:w1:transactional:postroom"
    assert msg["List-Id"] is None and msg["List-Unsubscribe"] is None


def test_marketing_mail_through_the_api_is_a_list_message_too_when_it_has_one_recipient():
    _, msg = render_doc({"stream": "marketing"})
    assert msg["Feedback-ID"] == "api:w1:marketing:postroom" and msg["List-Id"] == "<w1.postroom.test>"
    assert msg["List-Unsubscribe"]
    rendered = render_one({**message(["ann@x.test", "bob@x.test"]), "stream": "marketing"},
                          RenderContext(settings=SETTINGS, workspaces={"w1": {"_id": "w1", "name": "W"}}))
    shared = email.message_from_bytes(rendered["data"].encode(), policy=email.policy.default)
    assert shared["List-Id"] and shared["List-Unsubscribe"] is None  # one-click could not say whom


def test_transactional_mail_asked_without_a_footer_has_no_unsubscribe_link():
    _, msg = render_doc({"footer": False})
    assert "/u/" not in msg.get_body(("html",)).get_content()
    assert "/u/" not in msg.get_body(("plain",)).get_content()
    _, msg = render_doc({})  # rule 9: the footer by default
    assert "https://mail.example/u/" in msg.get_body(("html",)).get_content()


ADDRESS = {"company_name": "Acme & Co", "company_address": "1 Main St\nSuite <5>\r\nSpringfield"}


def test_marketing_mail_that_places_its_own_unsubscribe_link_still_shows_the_postal_address():
    own_link = '<html><body><p>Hi</p><a href="{{unsubscribe_url}}">Leave</a></body></html>'
    _, msg = render_doc({"kind": "campaign", "contact_id": "c-ann", "html": own_link,
                         "text": "Hi\nLeave: {{unsubscribe_url}}"}, settings=ADDRESS)
    html, text = msg.get_body(("html",)).get_content(), msg.get_body(("plain",)).get_content()
    assert "Acme &amp; Co<br>1 Main St<br>Suite &lt;5&gt;<br>Springfield</td>" in html
    assert html.count("/u/") == 1  # no second footer
    assert "Acme & Co\n1 Main St\nSuite <5>\nSpringfield\n" in text.replace("\r\n", "\n")
    _, msg = render_doc({"html": own_link}, settings=ADDRESS)  # transactional: the template decides
    assert "Springfield" not in msg.get_body(("html",)).get_content()


def test_the_default_footer_renders_a_multi_line_address_as_lines():
    _, msg = render_doc({"text": "Hello"}, settings=ADDRESS)
    assert "1 Main St<br>Suite &lt;5&gt;<br>Springfield<br>" in msg.get_body(("html",)).get_content()
    assert "\n1 Main St\nSuite <5>\nSpringfield\n" in msg.get_body(("plain",)).get_content().replace("\r\n", "\n")


def test_a_template_placing_the_address_itself_gets_it_as_lines_and_not_twice():
    own = '<p>{{company_address}}</p><a href="{{unsubscribe_url}}">Leave</a>'
    _, msg = render_doc({"kind": "campaign", "contact_id": "c-ann", "html": own}, settings=ADDRESS)
    html = msg.get_body(("html",)).get_content()
    assert "<p>1 Main St<br>Suite &lt;5&gt;<br>Springfield</p>" in html and html.count("Springfield") == 1


def test_mail_from_a_domain_with_a_verified_return_path_bounces_there():
    custom = {"custom_domain": True, "signing_domain": "acme.example", "from_address": "news@acme.example"}
    rendered, _ = render_doc(custom, return_paths={"w1:acme.example": "pr-bounces.acme.example"})
    assert rendered["mail_from"] == "bounce+msg_1@pr-bounces.acme.example"
    rendered, _ = render_doc(custom)  # not (yet) verified: the shared bounce domain
    assert rendered["mail_from"] == "bounce+msg_1@bounces.postroom.test"


def test_whatever_one_message_raises_fails_that_message_alone_with_its_reason():
    from pipelines.templates.render_message import render_all
    poisoned_template = "{{#if a}}" * 1000 + "x" + "{{/if}}" * 1000     # stored before nesting was limited
    ctx = RenderContext(settings=SETTINGS, workspaces={"w1": {"_id": "w1", "name": "W"}},
                        templates={("t-deep", 1): {"html": poisoned_template}})
    normal = [dict(message(["ann@x.test"]), _id=f"msg_ok{i}") for i in range(2)]
    deep = dict(message(["ann@x.test"]), _id="msg_deep", html=None, template_id="t-deep", template_version=1)
    broken = dict(message(["ann@x.test"]), _id="msg_broken", template_data_json='["not", "an", "object"]')
    too_big = dict(message(["ann@x.test"]), _id="msg_big", html="{{#each a}}{{#each a}}{{/each}}{{/each}}",
                   **stored_template_data({"a": list(range(4000))}))

    result = render_all([normal[0], deep, broken, too_big, normal[1]], ctx)

    assert [r["_id"] for r in result.rendered] == ["msg_ok0", "msg_ok1"]
    assert "nest more than 400 levels deep" in result.failed["msg_deep"]
    assert result.failed["msg_broken"].startswith("could not be rendered (TypeError: ")
    assert "loops need more than 100,000 steps" in result.failed["msg_big"]


LIMIT = 256 * 1024


def exactly(size: int, unit: str) -> str:
    """HTML of exactly `size` bytes made of `unit` repeated, padded with text."""
    body = unit * (size // len(unit))
    return body + "x" * (size - len(body))


def render_html(html, *, track=True, data=None):
    ctx = RenderContext(settings=SETTINGS, workspaces={"w1": {"_id": "w1", "name": "W"}})
    msg = {**message(["bob@x.test"]), "html": html, "track_opens": track, "track_clicks": track,
           **stored_template_data(data)}
    return ctx, msg


def test_html_of_exactly_256_kb_renders_with_our_footer_and_tracking_on_top():
    html = "<p><a href=\"https://shop.example/a\">shop</a></p>"
    html = html + exactly(LIMIT - len(html), "<p>ok</p>")
    assert len(html.encode()) == LIMIT == SETTINGS.max_html_bytes
    ctx, msg = render_html(html)
    body = html_body(render_one(msg, ctx))
    assert len(body.encode()) > LIMIT
    assert "https://mail.example/t/c/" in body and "https://mail.example/t/o/" in body
    assert "https://mail.example/u/" in body  # the footer's unsubscribe link


def test_click_tracking_that_would_add_more_than_the_margin_is_left_out_not_failed():
    html = exactly(LIMIT, '<a href="https://shop.example/item">i</a>')
    ctx, msg = render_html(html)
    body = html_body(render_one(msg, ctx))
    assert "/t/c/" not in body and body.count('href="https://shop.example/item"') == html.count("<a ")
    assert "https://mail.example/t/o/" in body, "the open pixel is still there"


def test_a_client_part_that_grows_past_256_kb_once_filled_still_fails_clearly():
    from pipelines.templates.render_message import render_all
    ctx, msg = render_html("<p>{{blob}}</p>", data={"blob": "x" * LIMIT})
    result = render_all([msg], ctx)
    assert not result.rendered
    assert "larger than 256 KB" in result.failed["msg_1"]


def test_the_client_part_is_measured_exactly_once_filled_our_footer_apart():
    source = "<p>{{blob}}</p>"  # 7 bytes around the value; no unsubscribe link: our footer is added
    fits = render_html(source, track=False, data={"blob": "y" * (LIMIT - 7)})
    body = html_body(render_one(fits[1], fits[0]))
    assert "y" * (LIMIT - 7) in body and "https://mail.example/u/" in body
    from pipelines.templates.render_message import render_all
    over = render_html(source, track=False, data={"blob": "y" * (LIMIT - 6)})
    assert "larger than 256 KB" in render_all([over[1]], over[0]).failed["msg_1"]


# --- the plain-text alternative, filled from the template's skeleton -----------------------

TEXT_CASES = [
    ({"html": "<p>Hi {{first_name}}</p><p><a href=\"{{site}}\">{{site}}</a> &middot; {{company}}</p>",
      **stored_template_data({"site": "https://acme.example", "company": "Eve & <Co>"})}, {}),
    ({"kind": "campaign", "campaign_id": "camp-1", "contact_id": "c-ann", "html": "<h1>{{title}}</h1>",
      **stored_template_data({"title": "Spring  sale\n"})},
     {"company_name": "Acme", "company_address": "1 Main St\nSpringfield"}),
    ({"html": "<p>{{#each items}}<li>{{this.name}}</li>{{/each}}</p><a href=\"{{unsubscribe_url}}\">Leave</a>",
      **stored_template_data({"items": [{"name": "a b"}, {"name": "o'Brien"}]})}, {"company_address": "x & y"}),
    ({"html": "", **stored_template_data({})}, {}),
    ({"html": "<html><body><p>Hi {{first_name}}</p></body></html>", "track_opens": True}, {}),
    ({"html": "<p>Hi {{first_name}}</p>", "track_opens": True, "track_clicks": True}, {}),
    ({"html": "<p>Hi {{first_name}}</p>", "preview_text": "Hello {{first_name}}"}, {}),
]


def test_the_text_part_is_what_the_html_part_reads_as():
    """Whichever way it is made (the skeleton, with or without an open pixel, or from the
    final HTML for click-tracked mail and preheaders), the text part is html_to_text of
    the HTML part, byte for byte."""
    from pipelines.templates.text import html_to_text
    for overrides, workspace_settings in TEXT_CASES:
        _, msg = render_doc(overrides, workspace_settings)
        html_part = msg.get_body(("html",))
        if html_part is None:
            assert msg.get_content() == ""
            continue
        html = html_part.get_payload(decode=True).decode().replace("\r\n", "\n")   # as rendered
        plain = msg.get_body(("plain",)).get_payload(decode=True).replace(b"\r\n", b"\n")
        assert plain.decode() == html_to_text(html)


def test_template_data_stored_as_json_text_renders():
    data = {"first_name": "Zoë", "big": 2**60, "items": [{"n": "Hat"}, {"n": "Scarf"}]}
    html = "<p>{{first_name}} {{big}}{{#each items}} {{this.n}}{{/each}}</p>"
    ctx = RenderContext(settings=SETTINGS, workspaces={"w1": {"_id": "w1", "name": "W"}})
    as_text = {**message(["bob@x.test"]), "html": html, **stored_template_data(data)}

    assert as_text["template_data_json"] == '{"first_name":"Zoë","big":1152921504606846976,' \
                                            '"items":[{"n":"Hat"},{"n":"Scarf"}]}'
    assert "<p>Zoë 1152921504606846976 Hat Scarf</p>" in html_body(render_one(as_text, ctx))


def test_template_data_that_json_cannot_carry_is_stored_as_its_text_not_refused():
    import datetime as dt

    from pipelines.templates.personalise import template_data_of
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)   # e.g. trigger data read from the store
    stored = stored_template_data({"when": when, "n": 3})
    assert template_data_of(stored) == {"when": "2026-01-02 03:04:05+00:00", "n": 3}
    assert template_data_of({}) is None and template_data_of(stored_template_data(None)) == {}
