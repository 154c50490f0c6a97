"""Rendering one stored message: whose links a recipient gets."""

import email
import email.policy
import re

from pipelines import links
from pipelines.render_message import RenderContext, render_one
from pipelines.settings import Settings

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
    token = re.search(rf"https://mail\.example/{path}/([\w\-]+\.[\w\-]+)", html_body(rendered)).group(1)
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


LIMIT = 256 * 1024


def exactly(size: int, unit: str) -> str:
    """HTML of exactly `size` bytes made of `unit` repeated, padded with text."""
    body = unit * (size // len(unit))
    return body + "x" * (size - len(body))


def render_html(html, *, track=True, data=None):
    ctx = RenderContext(settings=SETTINGS, workspaces={"w1": {"_id": "w1", "name": "W"}})
    msg = {**message(["bob@x.test"]), "html": html, "track_opens": track, "track_clicks": track,
           "template_data": data or {}}
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
    from pipelines.render_message import render_all
    ctx, msg = render_html("<p>{{blob}}</p>", data={"blob": "x" * LIMIT})
    result = render_all([msg], ctx)
    assert not result.rendered
    assert "larger than 256 KB" in result.failed["msg_1"]
