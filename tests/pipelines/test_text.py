"""The plain-text alternative made from HTML, and subject cleaning."""

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.templates.text import clean_subject, html_to_text


def per_line_reference(markup: str) -> str:
    """The straightforward version (whitespace folded line by line): the fast one must agree."""
    text = re.sub(r"(?is)<(script|style|head)[^>]*>.*?</\1>", "", markup)
    text = re.sub(r"(?i)</(p|div|h[1-6]|li|tr|table)>|<br\s*/?>", "\n", text)
    text = html.unescape(re.sub(r"<[^>]*>", "", text))
    lines = [re.sub(r"\s+", " ", line).strip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"


def test_blocks_become_lines_and_markup_goes():
    markup = ("<head><title>x</title></head><h1>Hi  Ann</h1><p>Your\n   order&nbsp;is <b>ready</b>.</p>"
              "<br>Bye<script>x()</script>")
    # source line breaks stay line breaks; runs of whitespace (a no-break space too) fold to one
    assert html_to_text(markup) == "Hi Ann\nYour\norder is ready.\n\nBye\n"


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["<p>", "</p>", "<br>", "<b>", "</div>", "a", "b c", " ", "\t", "\n", "\r\n",
                                 "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\xa0", "&amp;", "&#10;", "é"]),
                max_size=40).map("".join))
def test_the_whole_text_pass_agrees_with_folding_each_line(markup):
    assert html_to_text(markup) == per_line_reference(markup)


def test_links_keep_their_address_in_the_plain_part():
    markup = ('<p>Please <a class="btn" href="https://acme.example/confirm?a=1&amp;b=2">confirm <b>now</b></a>.</p>'
              '<p><a href="https://acme.example">https://acme.example</a> · <a href="mailto:help@acme.example">'
              'help@acme.example</a> · <a href="#top">Top</a> · '
              '<a href="https://x.example/i"><img src="i.png"></a></p>')
    assert html_to_text(markup) == ("Please confirm now (https://acme.example/confirm?a=1&b=2).\n"
                                     "https://acme.example · help@acme.example · Top · https://x.example/i\n")


def test_subjects_lose_tags_line_breaks_and_control_characters():
    assert clean_subject("<b>Hi</b>\r\nBcc: x@example.org\x1b[31m  there") == "Hi Bcc: x@example.org[31m there"


def test_header_text_folds_every_line_break_and_space_and_drops_controls():
    from pipelines.templates.text import header_text
    assert header_text(" a\r\nb\rc\nd\te\x0bf\x0cg\x85h\u2028i\u2029j\u00a0k\u3000l ") == "a b c d e f g h i j k l"
    assert header_text("N\x00U\x1bL\x7fL\x9b") == "NULL"
    assert header_text("x\ud800y") == "x\ufffdy"
