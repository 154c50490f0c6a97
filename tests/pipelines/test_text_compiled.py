"""The plain-text alternative filled from a skeleton made once per arrangement of a
template's pieces must be byte for byte what deriving it from the whole HTML gives, for
every template and every value (the values that could change how the markup parses take
the old path, message by message)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.messages import links
from pipelines.messages.tracking_rewrite import add_open_pixel, open_pixel_parts
from pipelines.templates.merge_compile import CompiledTemplate
from pipelines.templates.merge_values import Lines
from pipelines.templates.text import html_to_text, text_from_parts

# Markup a template holds, including the places where a value is risky: tag names,
# attributes, unfinished entities, links whose label may equal their address.
LITERALS = ["<p>", "</p>", "<br>", "<b>", "</b>", " ", "  ", "\n", "\r\n", "\t", "x", "Hi ", ", ", "&amp;", "&",
            "&amp", "&#", "<", "</", "<a href=\"", "<a href='mailto:", "\">", "'>", "</a>", "<a href=\"#", "=",
            "<img alt=\"", "\" src=\"x\">", "<a title=\"", "\" href=\"u\">", "<script>", "</script>", "<head>",
            "</head>", "<style>", "</style>", "<di", "v>", "href", "http://x/?a=", ";", "(", ")", "é", "\xa0",
            "</body>", "</BODY >", "<a href=\"&lt;\">", "&lt;", "<div title=\""]
VALUES = ["Ann", "a b", "a  b", " a", "a ", "", "\n", "x\ny", "<k>", "Eve & Co", "o'Brien", '"GX"', "amp;", "#top",
          "http://u", "u", "x href=", "href", "p", "br", "script", "lt", "#39;", "\xa0", "\ue000\ue001", "&amp;",
          "mailto:u", "Hi", "a\tb", "12", "=", "t\u2028u", "ä"]


@st.composite
def template_and_data(draw):
    names = [f"v{i}" for i in range(draw(st.integers(1, 6)))]
    pieces = []
    for _ in range(draw(st.integers(1, 14))):
        if draw(st.booleans()):
            pieces.append(draw(st.sampled_from(LITERALS)))
        else:
            pieces.append("{{%s}}" % draw(st.sampled_from(names)))
    if draw(st.booleans()):   # a loop and a condition: arrangements that differ per recipient
        pieces.insert(draw(st.integers(0, len(pieces))), "{{#each items}}<li>{{this}}</li>{{/each}}")
        pieces.insert(draw(st.integers(0, len(pieces))), "{{#if flag}}<b>{{v0}}</b>{{else}}&amp{{/if}}")
    data = {name: draw(st.sampled_from(VALUES)) for name in names}
    data["items"] = draw(st.lists(st.sampled_from(VALUES), max_size=3))
    data["flag"] = draw(st.booleans())
    if draw(st.booleans()):
        data[names[0]] = Lines(draw(st.sampled_from(["1 Main St\nSpringfield", "a\n\nb", "x & y\nz"])))
    return "".join(pieces), data


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template_and_data(), st.data())
def test_the_compiled_text_is_exactly_the_derived_text(case, more):
    source, data = case
    template = CompiledTemplate(source, "html")
    parts = template.render_parts(data)
    assert text_from_parts(parts) == html_to_text("".join(parts))
    other = {**data, **{k: more.draw(st.sampled_from(VALUES)) for k in data if k.startswith("v")}}
    parts = template.render_parts(other)   # a second recipient: the same skeleton, other values
    assert text_from_parts(parts) == html_to_text("".join(parts))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template_and_data(), st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1))
def test_with_an_open_pixel_the_compiled_text_is_exactly_the_derived_text(case, token):
    """Each recipient's pixel has its own token; the skeleton is made with a stand-in."""
    source, data = case
    parts = CompiledTemplate(source, "html").render_parts(data)
    sent = add_open_pixel("".join(parts), links.open_pixel_url("https://mail.example", token))
    assert text_from_parts(open_pixel_parts(parts, "https://mail.example")) == html_to_text(sent)


def test_a_newsletter_takes_the_skeleton_and_matches():
    from bench.newsletter import OURS, contacts
    from pipelines.templates import text
    template = CompiledTemplate(OURS, "html")
    for row in contacts(50):
        parts = template.render_parts(row)
        assert text_from_parts(parts) == html_to_text("".join(parts))
    assert any(s is not None for s in text._SKELETONS.values())
