"""The plain-text alternative made from HTML, and subject cleaning."""

import html
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import Markup

from pipelines.templates import text
from pipelines.templates.text import clean_subject, html_to_text, text_from_parts


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


# --- linear time on hostile markup ----------------------------------------------------

# The implementation html_to_text had until it was made linear, kept here only as the
# reference: its re.sub with these patterns took time quadratic (an unclosed `<`, `<script`
# or `<a href="…">` each scanning to the end) or cubic (many `href` in an unclosed `<a`) in
# the length of hostile markup. The linear one must give exactly its output.
OLD_TAG = re.compile(r"<[^>]*>")
OLD_BLOCK_END = re.compile(r"(?i)</(p|div|h[1-6]|li|tr|table)>|<br\s*/?>")
OLD_SCRIPT_STYLE = re.compile(r"(?is)<(script|style|head)[^>]*>.*?</\1>")
OLD_LINK = re.compile(r"""(?is)<a\s[^>]*?\bhref\s*=\s*["']([^"']*)["'][^>]*>(.*?)</a\s*>""")


def old_link_as_text(match: re.Match) -> str:
    url, inner = html.unescape(match.group(1)).strip(), match.group(2)
    label = html.unescape(OLD_TAG.sub("", inner)).strip()
    if not url or url.startswith("#") or label in (url, url.removeprefix("mailto:")):
        return inner
    return f"{inner} ({url})" if label else url


def old_html_to_text(markup: str) -> str:
    text = OLD_SCRIPT_STYLE.sub("", markup)
    text = OLD_LINK.sub(old_link_as_text, text)
    text = OLD_BLOCK_END.sub("\n", text)
    text = html.unescape(OLD_TAG.sub("", text))
    text = re.sub(r"[^\S\n]+", " ", "\n".join(text.splitlines()))
    out: list[str] = []
    for line in (line.strip() for line in text.split("\n")):
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"


# Pieces that start, end or break the patterns' matches: links (quotes, `>` inside an
# address, several href), script/style/head in any case and with the letters the regex
# engine folds (ſ, İ, ı: `<ſcript>` opens what `</script>` does not close), tags left open.
PIECES = ['<a href="', "<a href='", "<A HREF=", '<a\thref = "', '"', "'", ">", "<", "</a>", "</A >", "</a\n>", "<a ",
          "<a\t", "<a", "href", "=", ' href="u">', "hhref='", "<script>", "</script>", "<SCRIPT", "</Script>",
          "<style>", "</style>", "</STYLE>", "<head>", "</head>", "</hEAd >", "<HEAD x>", "<header>", "<ſcript>",
          "</ſcript>", "<ſtyle>", "</ſtyle>", "<scrİpt>", "</scrİpt>", "</scrıpt>", "</scrIpt>", "<br>", "<br/>",
          "<BR />", "</p>", "<div>", "</div>", "<!--", "-->", "&", "&amp;", "&#", "&#65", "&#x41;", "&lt;", "#top",
          "mailto:", "x", "u", "a", "h", "/", "</", "sty", "le>", " ", "\n", "\u2028", "\xa0", "é"]
HTML_ISH = st.one_of(st.lists(st.sampled_from(PIECES), max_size=50).map("".join),
                     st.text(alphabet='<>/"\'= \n&#;ahrefscriptyld1xſİı', max_size=80))


@settings(max_examples=600, deadline=None)
@given(HTML_ISH)
def test_the_linear_version_gives_exactly_what_the_regexes_gave(markup):
    assert html_to_text(markup) == old_html_to_text(markup)
    # stage by stage too, so a later stage cannot hide a difference
    assert text._drop_script_style(markup) == OLD_SCRIPT_STYLE.sub("", markup)
    assert text._sub_links(markup, lambda m: f"[{m.group(1)}|{m.group(2)}]") == \
        OLD_LINK.sub(lambda m: f"[{m.group(1)}|{m.group(2)}]", markup)
    assert text._strip_tags(markup) == OLD_TAG.sub("", markup)


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


HOSTILE = {  # name: markup of about `size` characters
    "unclosed links": lambda n: _fill('<a href="x">', n),
    "unclosed links, one closed at the end": lambda n: _fill('<a href="x">', n) + "</a>",
    "links that never finish their tag": lambda n: _fill('<a href="x" ', n),
    "many href in one unclosed <a": lambda n: "<a " + _fill("href='' ", n),
    "an address with no closing quote": lambda n: "<a href='" + _fill("x>", n),
    "</a with no > inside a link": lambda n: '<a href="x">' + _fill("</a" + " " * 40, n),
    "unclosed script": lambda n: _fill("<script>", n),
    "script tags with no >": lambda n: _fill("<script ", n),
    "script, style and head of every case, never closed": lambda n: _fill("<ScRiPt><STYLE><head><ſcript>", n),
    "closings of another name": lambda n: "<script>" + _fill("</style></scrip></abcdef>", n),
    "unclosed <header>": lambda n: _fill("<header>", n),
    "unclosed comments": lambda n: _fill("<!-- c ", n),
    "bare <": lambda n: "<" * n,
    "<br with spaces and no >": lambda n: _fill("<br" + " " * 40, n),
    "a link's text of bare <": lambda n: '<a href="x">' + "<" * n + "</a>",
    "deep nesting": lambda n: _fill("<div><b>", n // 2) + _fill("</b></div>", n // 2),
    "deeply nested links": lambda n: _fill('<a href="u">t', n // 2) + _fill("</a>", n // 2),
    "a run of &": lambda n: "&" * n,
    "a run of &#": lambda n: _fill("&#", n),
    "a decimal reference of all the digits": lambda n: "&#" + "1" * n,
}
SMALL, LARGE = 64 * 1024, 256 * 1024


def _cpu_seconds(call, times: int) -> float:
    """The least CPU time of two rounds of `times` calls (CPU time: other processes on the
    machine do not count; the least: a round slowed by this one's collector or cache does not)."""
    best = float("inf")
    for _ in range(2):
        start = time.process_time()
        for _ in range(times):
            call()
        best = min(best, time.process_time() - start)
    return best


def _growth(call_on_size) -> float:
    """How much more a call costs on LARGE than on SMALL (4× the size): ~4 when the work is
    linear, 16 when quadratic (64 cubic). The small size is timed over 4 calls so that both
    rounds do about the same work, long enough for the clock. Measured again, up to three
    times, while over 8: noise does not last, a quadratic cost does."""
    small, large = call_on_size(SMALL), call_on_size(LARGE)
    growth = float("inf")
    for _ in range(3):
        growth = min(growth, _cpu_seconds(large, 1) / (_cpu_seconds(small, 4) / 4))
        if growth < 8:
            break
    return growth


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_markup_takes_time_linear_in_its_size(name):
    make = HOSTILE[name]
    small = make(2048)  # where the old regexes still answer quickly: the same output
    assert html_to_text(small) == (old_html_to_text(small) if "decimal" not in name else "\ufffd\n")
    markups = {size: make(size) for size in (SMALL, LARGE)}
    assert len(markups[LARGE]) >= LARGE
    assert _growth(lambda size: lambda: html_to_text(markups[size])) < 8


@pytest.mark.parametrize("name", ["unclosed links", "unclosed script", "bare <"])
def test_a_hostile_template_takes_time_linear_in_its_size_on_the_skeleton_path(name):
    """The same from a template's pieces: the skeleton is made once per arrangement, so
    each round forgets the skeletons made."""
    def parts(size):
        literal = HOSTILE[name](size // 2)
        return [literal, Markup("Ann"), literal, Markup("Bo"), "<p>"]

    def call_on_size(size):
        pieces = parts(size)

        def call():
            text._SKELETONS.clear()
            return text_from_parts(pieces)
        return call
    small = parts(2048)
    assert text_from_parts(small) == old_html_to_text("".join(small))
    assert _growth(call_on_size) < 8


def test_many_values_after_a_long_text_are_placed_in_one_pass():
    """Whether a value stands inside a tag was asked by searching back from each value to
    the text's start: values × length."""
    def call_on_size(size):
        pieces = ["x" * size, *[p for _ in range(2000) for p in (Markup("v"), " ")]]

        def call():
            text._SKELETONS.clear()
            return text_from_parts(pieces)
        return call
    assert _growth(call_on_size) < 8


def test_a_decimal_reference_of_any_length_is_a_character_or_u_fffd():
    """html.unescape raises ValueError past sys.get_int_max_str_digits() (4300) digits."""
    assert html_to_text("a&#" + "0" * 5000 + "65;b") == "aAb\n"
    assert html_to_text("a&#" + "9" * 5000 + "b &#12345678; &#1114112; &#0; &#65") == \
        "a\ufffdb \ufffd \ufffd \ufffd A\n"
    assert html_to_text("&#x" + "0" * 5000 + "41;") == "A\n"
    assert clean_subject("&#" + "7" * 5000) == "\ufffd"
    assert text._CHARREF.pattern == html._charref.pattern  # html.unescape's own


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["&#", "&#x", "&", "0", "00000000", "6", "5", "9", "1114111", "x", "41", ";", " ",
                                 "amp", "lt", "&#12345678"]), max_size=20).map("".join))
def test_references_unescape_as_html_unescape_has_them(markup):
    assert text._unescape(markup) == html.unescape(markup)
    assert text._CHARREF.sub(text._charref, markup) == html.unescape(markup)
