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


def test_whatever_one_message_raises_fails_that_message_alone_with_its_reason():
    from pipelines.render_message import render_all
    poisoned_template = "{{#if a}}" * 1000 + "x" + "{{/if}}" * 1000     # stored before nesting was limited
    ctx = RenderContext(settings=SETTINGS, workspaces={"w1": {"_id": "w1", "name": "W"}},
                        templates={("t-deep", 1): {"html": poisoned_template}})
    normal = [dict(message(["ann@x.test"]), _id=f"msg_ok{i}") for i in range(2)]
    deep = dict(message(["ann@x.test"]), _id="msg_deep", html=None, template_id="t-deep", template_version=1)
    broken = dict(message(["ann@x.test"]), _id="msg_broken", template_data=["not", "an", "object"])
    too_big = dict(message(["ann@x.test"]), _id="msg_big", html="{{#each a}}{{#each a}}{{/each}}{{/each}}",
                   template_data={"a": list(range(4000))})

    result = render_all([normal[0], deep, broken, too_big, normal[1]], ctx)

    assert [r["_id"] for r in result.rendered] == ["msg_ok0", "msg_ok1"]
    assert "nest more than 400 levels deep" in result.failed["msg_deep"]
    assert result.failed["msg_broken"].startswith("could not be rendered (TypeError: ")
    assert "loops need more than 100,000 steps" in result.failed["msg_big"]
