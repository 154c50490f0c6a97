"""json_structure → email HTML: every block type, its validation, and email-safety."""

import re

import pytest

from pipelines.core.errors import ValidationFailed
from pipelines.templates.email_blocks import BLOCK_TYPES, validate_structure
from pipelines.templates.email_blocks_html import render_structure
from pipelines.templates.html_sanitize import sanitize_html
from pipelines.templates.merge_compile import compile_template


def render(*blocks, settings=None, data=None):
    structure = {"blocks": [{"id": f"b{i}", **b} for i, b in enumerate(blocks)]}
    if settings is not None:
        structure["settings"] = settings
    validate_structure(structure)
    source = render_structure(structure)
    return compile_template(source).render(data or {})


def assert_email_safe(html):
    assert "<script" not in html.lower()
    assert not re.search(r"\son[a-z]+\s*=", html, re.IGNORECASE)
    assert "javascript:" not in html.lower()
    for img in re.findall(r"<img[^>]*>", html):
        assert re.search(r'\salt="[^"]*"', img), img
    assert "<div style" in html or "<table" in html


def test_the_document_is_a_centred_table_of_the_content_width_with_the_settings_inline():
    html = render({"type": "spacer", "content": {"height": 10}},
                  settings={"fontFamily": "Verdana, sans-serif", "contentWidth": 640, "backgroundColor": "#eeeeee",
                            "contentBackgroundColor": "#fafafa", "defaultTextColor": "#333333"})
    assert html.startswith("<!DOCTYPE html>")
    assert '<body style="margin:0;padding:0;background-color:#eeeeee;">' in html
    assert 'width="640" bgcolor="#fafafa" style="width:100%;max-width:640px;background-color:#fafafa;' in html
    assert 'role="presentation" cellpadding="0" cellspacing="0" border="0"' in html
    assert "<style" not in html and "class=" not in html
    assert_email_safe(html)


def test_header_renders_the_level_alignment_and_colour_inline():
    html = render({"type": "header", "content": {"text": "Hi {{firstName|there}} & co", "level": 2,
                                                   "alignment": "center", "color": "#123456"}},
                  settings={"defaultTextColor": "#333333"}, data={"firstName": "<Ann>"})
    assert re.search(r'<td align="center" style="[^"]*"><h2 style="[^"]*font-size:24px;[^"]*color:#123456;'
                     r'text-align:center;">Hi &lt;Ann&gt; &amp; co</h2>', html)


def test_text_keeps_rich_html_and_strips_script_handlers_and_javascript_urls():
    html = render({"type": "text", "content": {
        "html": "<p onclick='steal()' style='color:blue'>Rich <b>text</b><script>alert(1)</script>"
                "<a href='javascript:alert(1)'>x</a><a href=' JaVa&#x09;script:alert(2)'>y</a>"
                "<a href='https://ok.example/?a=1&amp;b=2'>ok</a></p>", "color": "#444444"}})
    assert '<p style="color:blue">Rich <b>text</b><a>x</a><a>y</a>' in html
    assert '<a href="https://ok.example/?a=1&amp;b=2">ok</a>' in html
    assert "alert" not in html
    assert_email_safe(html)


def test_button_is_a_bulletproof_table_cell_with_bgcolor_and_a_padded_link():
    html = render({"type": "button", "content": {"text": "Buy now", "url": "https://shop.example/{{id}}",
                                                   "backgroundColor": "#ff0000", "textColor": "#ffffff",
                                                   "borderRadius": 4, "alignment": "left"}}, data={"id": "42"})
    assert re.search(r'<table [^>]*align="left"[^>]*><tr><td align="center" bgcolor="#ff0000" '
                     r'style="border-radius:4px;background-color:#ff0000;"><a href="https://shop.example/42" '
                     r'target="_blank" style="display:inline-block;padding:12px 24px;[^"]*color:#ffffff;'
                     r'text-decoration:none;[^"]*">Buy now</a></td></tr></table>', html)


def test_full_width_button_fills_the_row():
    html = render({"type": "button", "content": {"text": "Go", "url": "https://x.example", "fullWidth": True}})
    assert 'width="100%" align="center"' in html and "display:block;" in html


@pytest.mark.parametrize("width, attr, max_width", [
    ("auto", "", "100%"), ("full", ' width="552"', "552px"), (300, ' width="300"', "300px"),
    (5000 // 5, ' width="552"', "552px")])
def test_image_has_alt_block_display_and_the_requested_width(width, attr, max_width):
    html = render({"type": "image", "content": {"src": "https://img.example/a.png", "alt": "A \"quoted\" cat",
                                                  "width": width, "alignment": "right",
                                                  "url": "https://link.example"}})
    assert (f'<a href="https://link.example" target="_blank"><img src="https://img.example/a.png" '
            f'alt="A &#34;quoted&#34; cat"{attr} style="display:block;border:0;outline:none;text-decoration:none;'
            f'height:auto;width:100%;max-width:{max_width};"></a>') in html.replace("&quot;", "&#34;")
    assert 'align="right"' in html


def test_an_image_without_alt_still_gets_an_empty_alt():
    html = render({"type": "image", "content": {"src": "https://img.example/a.png"}})
    assert 'alt=""' in html


def test_divider_is_a_bordered_cell_of_the_given_width_style_and_thickness():
    html = render({"type": "divider", "content": {"color": "#cccccc", "thickness": 3, "style": "dotted", "width": 50}})
    assert ('width="50%" align="center"><tr><td style="border-top:3px dotted #cccccc;font-size:0;line-height:0;'
            'height:0;">&nbsp;</td></tr></table>') in html


def test_spacer_is_a_cell_of_the_given_height():
    assert '<tr><td style="height:40px;line-height:40px;font-size:0;">&nbsp;</td></tr>' in \
        render({"type": "spacer", "content": {"height": 40}})


def test_columns_are_side_by_side_cells_with_their_own_blocks():
    html = render({"type": "columns", "content": {"gap": 20, "columns": [
        {"width": 40, "blocks": [{"id": "l", "type": "text", "content": {"html": "LEFT"}}]},
        {"width": 60, "blocks": [{"id": "r", "type": "header", "content": {"text": "RIGHT"}}]}]}})
    assert re.search(r'<td valign="top" width="40%" style="width:40%;padding:0 10px;"><table [^>]*>.*LEFT.*</table>'
                     r'</td><td valign="top" width="60%" style="width:60%;padding:0 10px;"><table [^>]*>.*RIGHT', html)


def test_columns_without_widths_share_the_row_evenly():
    html = render({"type": "columns", "content": {"columns": [{"blocks": []}, {"blocks": []}, {"blocks": []}]}})
    assert html.count('width="33.33%"') == 3


def test_social_links_are_labelled_or_use_an_icon_with_alt():
    html = render({"type": "social", "content": {"alignment": "right", "iconSize": 32, "networks": [
        {"network": "facebook", "url": "https://facebook.com/acme"},
        {"network": "x", "url": "https://x.com/acme", "iconUrl": "https://img.example/x.png",
         "label": "Follow on X"}]}})
    assert ('<a href="https://facebook.com/acme" target="_blank" style="color:#2563eb;text-decoration:none;">'
            'Facebook</a>') in html
    assert '<img src="https://img.example/x.png" alt="Follow on X" width="32" height="32"' in html
    assert_email_safe(html)


def test_dynamic_repeats_a_card_per_item_of_the_data_list_and_shows_empty_text_otherwise():
    block = {"type": "dynamic", "content": {"source": "products", "titleField": "name", "priceField": "cost",
                                             "emptyText": "Nothing new", "buttonText": "See it"}}
    html = render(block, data={"products": [
        {"name": "Hat <red>", "cost": "$5", "url": "https://s.example/hat", "image": "https://i.example/hat.png"},
        {"name": "Scarf"}]})
    assert "Hat &lt;red&gt;" in html and "$5" in html and "Scarf" in html
    assert '<img src="https://i.example/hat.png" alt="Hat &lt;red&gt;"' in html
    assert html.count(">See it</a>") == 1 and "Nothing new" not in html
    assert "Nothing new" in render(block, data={"products": []})


def test_conditional_shows_its_blocks_or_the_else_blocks_at_send_time():
    block = {"type": "conditional", "content": {
        "condition": "plan == 'pro'", "blocks": [{"id": "p", "type": "text", "content": {"html": "PRO PERKS"}}],
        "elseBlocks": [{"id": "f", "type": "text", "content": {"html": "UPGRADE"}}]}}
    assert "PRO PERKS" in render(block, data={"plan": "pro"}) and "UPGRADE" not in render(block, data={"plan": "pro"})
    assert "UPGRADE" in render(block, data={"plan": "free"})


def test_hero_has_bgcolor_background_image_title_and_a_button():
    html = render({"type": "hero", "content": {"title": "Big sale", "subtitle": "Today only",
                                                 "backgroundImage": "https://img.example/hero(1).png",
                                                 "backgroundColor": "#000000", "textColor": "#ffffff",
                                                 "buttonText": "Shop", "buttonUrl": "https://shop.example"}})
    assert ('<td align="center" bgcolor="#000000" background="https://img.example/hero(1).png" '
            "style=\"background-color:#000000;background-image:url('https://img.example/hero%281%29.png');") in html
    assert ">Big sale</h1>" in html and ">Today only</p>" in html and ">Shop</a>" in html


def test_profile_is_a_round_photo_beside_name_role_and_bio():
    html = render({"type": "profile", "content": {"name": "Ann Lee", "role": "CEO", "bio": "Founder & baker",
                                                    "imageUrl": "https://img.example/ann.png"}})
    assert re.search(r'<img src="https://img.example/ann.png" alt="Ann Lee" width="72" [^>]*border-radius:36px;', html)
    assert ">Ann Lee</p>" in html and ">CEO</p>" in html and "Founder &amp; baker" in html


def test_html_block_is_kept_but_sanitised():
    html = render({"type": "html", "content": {
        "html": "<div style='color:red' onmouseover='x()'>raw<iframe src='https://evil'>f</iframe>"
                "<img src='data:text/html;base64,xx' alt='d'><img src='data:image/png;base64,xx' alt='ok'></div>"
                "<!--[if mso]>outlook<![endif]-->"}})
    assert '<div style="color:red">raw<img alt="d"><img src="data:image/png;base64,xx" alt="ok"></div>' in html
    assert "<!--[if mso]>outlook<![endif]-->" in html
    assert_email_safe(html)


def test_dropshadow_wraps_its_blocks_in_a_panel_with_box_shadow_and_border_fallback():
    html = render({"type": "dropshadow", "content": {"blur": 20, "offsetY": 6, "shadowColor": "#999999",
                                                       "borderRadius": 10, "padding": 16, "blocks": [
                                                           {"id": "x", "type": "header",
                                                            "content": {"text": "Boxed"}}]}})
    assert re.search(r'<td bgcolor="#ffffff" style="background-color:#ffffff;border:1px solid #e5e7eb;'
                     r'border-radius:10px;box-shadow:0px 6px 20px #999999;padding:16px;"><table [^>]*>.*Boxed', html)


def test_every_block_type_has_a_renderer():
    minimal = {"dynamic": {"source": "items"}, "conditional": {"condition": "x"}}
    for kind in BLOCK_TYPES:
        html = render({"type": kind, "content": minimal.get(kind, {})})
        assert html.endswith("</body></html>\n")
        assert_email_safe(html)


# --- validation ---------------------------------------------------------------------------

@pytest.mark.parametrize("structure, path", [
    ([], "json_structure"),
    ({}, "json_structure.blocks"),
    ({"blocks": {}}, "json_structure.blocks"),
    ({"blocks": [{"type": "text"}]}, "json_structure.blocks[0].id"),
    ({"blocks": [{"id": "a", "type": "video"}]}, "json_structure.blocks[0].type"),
    ({"blocks": [{"id": "a", "type": "text", "content": "hi"}]}, "json_structure.blocks[0].content"),
    ({"blocks": [{"id": "a", "type": "spacer"}, {"id": "b", "type": "header", "content": {"level": 4}}]},
     "json_structure.blocks[1].content.level"),
    ({"blocks": [{"id": "a", "type": "header", "content": {"level": True}}]}, "json_structure.blocks[0].content.level"),
    ({"blocks": [{"id": "a", "type": "button", "content": {"url": "javascript:alert(1)"}}]},
     "json_structure.blocks[0].content.url"),
    ({"blocks": [{"id": "a", "type": "button", "content": {"backgroundColor": "red;background:url(x)"}}]},
     "json_structure.blocks[0].content.backgroundColor"),
    ({"blocks": [{"id": "a", "type": "image", "content": {"width": "huge"}}]},
     "json_structure.blocks[0].content.width"),
    ({"blocks": [{"id": "a", "type": "divider", "content": {"style": "double"}}]},
     "json_structure.blocks[0].content.style"),
    ({"blocks": [{"id": "a", "type": "spacer", "content": {"height": -1}}]}, "json_structure.blocks[0].content.height"),
    ({"blocks": [{"id": "a", "type": "columns", "content": {"columns": [{"blocks": [
        {"id": "c", "type": "header", "content": {"alignment": "middle"}}]}]}}]},
     "json_structure.blocks[0].content.columns[0].blocks[0].content.alignment"),
    ({"blocks": [{"id": "a", "type": "columns", "content": {"columns": [{}] * 5}}]},
     "json_structure.blocks[0].content.columns"),
    ({"blocks": [{"id": "a", "type": "social", "content": {"networks": [{"network": "myspace"}]}}]},
     "json_structure.blocks[0].content.networks[0].network"),
    ({"blocks": [{"id": "a", "type": "dynamic", "content": {}}]}, "json_structure.blocks[0].content.source"),
    ({"blocks": [{"id": "a", "type": "dynamic", "content": {"source": "x.__y z"}}]},
     "json_structure.blocks[0].content.source"),
    ({"blocks": [{"id": "a", "type": "conditional", "content": {"condition": "a ==="}}]},
     "json_structure.blocks[0].content.condition"),
    ({"blocks": [{"id": "a", "type": "conditional",
                  "content": {"condition": "a", "elseBlocks": [{"id": 5, "type": "text"}]}}]},
     "json_structure.blocks[0].content.elseBlocks[0].id"),
    ({"blocks": [{"id": "a", "type": "dropshadow", "content": {"blur": "big"}}]},
     "json_structure.blocks[0].content.blur"),
    ({"blocks": [{"id": "a", "type": "hero", "content": {"backgroundImage": "javascript:x"}}]},
     "json_structure.blocks[0].content.backgroundImage"),
    ({"blocks": [{"id": "a", "type": "profile", "content": {"name": 7}}]}, "json_structure.blocks[0].content.name"),
    ({"blocks": [], "settings": {"contentWidth": 50}}, "json_structure.settings.contentWidth"),
    ({"blocks": [], "settings": {"fontFamily": "x;}</style><script>"}}, "json_structure.settings.fontFamily"),
    ({"blocks": [], "settings": "wide"}, "json_structure.settings"),
])
def test_invalid_structures_are_refused_with_a_precise_path(structure, path):
    with pytest.raises(ValidationFailed) as caught:
        validate_structure(structure)
    assert caught.value.path == path


def test_nesting_and_size_are_bounded():
    deep = {"id": "x", "type": "spacer"}
    for _ in range(5):
        deep = {"id": "x", "type": "dropshadow", "content": {"blocks": [deep]}}
    with pytest.raises(ValidationFailed, match="nest at most"):
        validate_structure({"blocks": [deep]})
    with pytest.raises(ValidationFailed, match="at most 500 blocks"):
        validate_structure({"blocks": [{"id": str(i), "type": "spacer"} for i in range(501)]})


def test_unknown_editor_fields_are_kept_and_ignored():
    structure = {"blocks": [{"id": "a", "type": "text", "content": {"html": "x", "editorState": {"open": True}},
                             "locked": True}], "version": 3}
    assert validate_structure(structure) is structure


def test_sanitizer_keeps_merge_tags_in_text_and_attributes():
    assert sanitize_html('<a href="{{unsubscribe_url}}">{{#if x}}bye{{/if}}</a>') == \
        '<a href="{{unsubscribe_url}}">{{#if x}}bye{{/if}}</a>'
