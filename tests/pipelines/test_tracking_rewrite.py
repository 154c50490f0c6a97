from hypothesis import given
from hypothesis import strategies as st

from pipelines.messages import links, tracking_rewrite

BASE = "https://mail.example.com"
SECRET = "k"


def message(opens=True, clicks=True):
    return {"_id": "msg_1", "workspace_id": "w1", "track_opens": opens, "track_clicks": clicks}


def click_targets(markup):
    import re
    out = []
    for href in re.findall(r'(?i)href="([^"]*)"', markup):
        if href.startswith(BASE + "/t/c/"):
            payload = links.verify("click", href[len(BASE + "/t/c/"):], SECRET)
            out.append(payload["u"])
        else:
            out.append(None)
    return out


def test_the_pixel_goes_just_before_the_closing_body_tag():
    html = tracking_rewrite.apply("<html><body><p>Hi</p></body></html>", message(clicks=False),
                                  base_url=BASE, secret_key=SECRET)
    assert html.startswith("<html><body><p>Hi</p><img src=\"" + BASE + "/t/o/")
    assert html.endswith('/></body></html>')
    token = html.split("/t/o/")[1].split(".gif")[0]
    assert links.verify("open", token, SECRET) == {"w": "w1", "m": "msg_1"}


def test_a_fragment_without_body_gets_the_pixel_at_the_end():
    html = tracking_rewrite.apply("<p>Hi</p>", message(clicks=False), base_url=BASE, secret_key=SECRET)
    assert html.startswith("<p>Hi</p><img ")


def test_web_links_are_rewritten_to_signed_redirects_carrying_the_original_url():
    html = ('<a href="https://shop.example/a?x=1&amp;y=2">A</a> <a class=b href=\'http://x.example/\'>B</a>'
            '<A HREF=https://caps.example/p>C</A>')
    out = tracking_rewrite.apply(html, message(opens=False), base_url=BASE, secret_key=SECRET)
    assert click_targets(out) == ["https://shop.example/a?x=1&y=2", "http://x.example/", "https://caps.example/p"]
    assert 'class=b' in out and ">A</a>" in out


def test_mailto_anchors_relative_and_recipient_page_links_are_left_alone():
    unsubscribe = links.unsubscribe_url(BASE, "tok.en")
    preferences = links.preferences_url(BASE, "tok.en")
    html = (f'<a href="mailto:a@b.c">m</a><a href="#top">t</a><a href="/rel">r</a>'
            f'<a href="tel:+1">p</a><a href="{unsubscribe}">u</a><a href="{preferences}">p</a>')
    out = tracking_rewrite.apply(html, message(opens=False), base_url=BASE, secret_key=SECRET)
    assert out == html


def test_nothing_changes_when_tracking_is_off():
    html = '<body><a href="https://x.example">x</a></body>'
    assert tracking_rewrite.apply(html, message(False, False), base_url=BASE, secret_key=SECRET) == html


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters='"\'<> '), max_size=40))
def test_any_url_survives_the_round_trip_through_the_token(path):
    url = "https://example.com/" + path
    import html as html_lib
    out = tracking_rewrite.rewrite_links(f'<a href="{html_lib.escape(url)}">x</a>',
                                         lambda u: BASE + "/t/c/" + links.sign("click", {"u": u}, SECRET))
    assert click_targets(out) == [url.strip() if url.strip().lower().startswith("https://") else url]
