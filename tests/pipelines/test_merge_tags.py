"""The merge-tag language, as a template author sees it: what a tag renders to."""

import datetime as dt
import html
import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import escape

from pipelines.templates.merge_compile import CompiledTemplate, compile_template
from pipelines.templates.merge_tags import MergeTagError
from pipelines.templates.personalise import compile_content, recipient_data, render_content, system_fields
from pipelines.templates.text import CONTROL, clean_subject

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: n not in ("this", "true", "false", "null", "else"))


def body(source, **data):
    return compile_template(source, "html").render(data)


def plain(source, **data):
    return compile_template(source, "text").render(data)


# --- values and escaping ----------------------------------------------------------------

@given(value=texts)
def test_any_value_is_html_escaped_in_a_body(value):
    out = body("<p>{{v}}</p>", v=value)
    assert out == f"<p>{escape(value) if value.strip() else ''}</p>"
    assert html.unescape(out) == f"<p>{value if value.strip() else ''}</p>"
    assert not any(c in out[3:-4] for c in "<>\"'")


@given(value=texts)
def test_any_value_is_inserted_unescaped_in_a_subject(value):
    content = compile_content("Hi {{v}}", None, None)
    subject, _, _ = render_content(content, {"v": value})
    assert subject == clean_subject("Hi " + (value if value.strip() else ""))
    assert "\r" not in subject and "\n" not in subject
    if "<" not in value and "&" not in value:
        assert subject == " ".join(CONTROL.sub("", "Hi " + value).split())


def test_control_characters_are_dropped_from_a_subject():
    content = compile_content("Order {{id}}", None, None)
    subject, _, _ = render_content(content, {"id": "7\x00\x1b[31m\x7f\x9b red"})
    assert subject == "Order 7[31m red"


def test_a_subject_cannot_inject_a_header_or_markup():
    content = compile_content("Order {{id}}", None, None)
    subject, _, _ = render_content(content, {"id": "42\r\nBcc: x@evil.test <b>bold</b>"})
    assert subject == "Order 42 Bcc: x@evil.test bold"


@given(value=texts, fallback=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="|}{"),
                                     max_size=20))
def test_the_fallback_is_used_exactly_when_the_value_is_blank(value, fallback):
    out = plain("{{firstName|%s}}" % fallback, firstName=value)
    assert out == (value if value.strip() else fallback.strip())


def test_a_missing_or_null_field_uses_the_fallback():
    assert plain("Hi {{firstName|there}}!") == "Hi there!"
    assert plain("Hi {{firstName|there}}!", firstName=None) == "Hi there!"
    assert plain("Hi {{ firstName | there }}!", firstName="Ann") == "Hi Ann!"


@pytest.mark.parametrize("fmt, expected", [("text", "mcDONALD smith"), ("uppercase", "MCDONALD SMITH"),
                                           ("lowercase", "mcdonald smith"), ("capitalize", "Mcdonald smith")])
def test_each_format_transforms_the_value(fmt, expected):
    assert plain("{{lastName||%s}}" % fmt, lastName="mcDONALD smith") == expected


def test_a_format_applies_to_the_fallback_too():
    assert plain("{{firstName|friend|uppercase}}") == "FRIEND"


@given(value=texts)
def test_formats_agree_with_python_string_methods(value):
    if value.strip():
        assert plain("{{v||uppercase}}", v=value) == value.upper()
        assert plain("{{v||lowercase}}", v=value) == value.lower()


def test_non_text_values_render_as_json_like_text():
    assert plain("{{a}} {{b}} {{c}} {{d}} {{e}} {{f}}", a=3, b=2.5, c=True, d=False, e=4.0, f=["x", 1]) \
        == "3 2.5 true false 4 x, 1"


def test_contact_fields_have_both_spellings_and_company_comes_from_attributes():
    data = recipient_data(contact={"first_name": "Ann", "last_name": "Lee", "email": "ann@x.test",
                                   "attributes": {"company": "Acme", "plan": "pro"}},
                          email="ann@x.test", template_data={"order": 7}, system={})
    out = plain("{{firstName}}/{{first_name}} {{lastName}}/{{last_name}} {{email}} {{company}} "
                "{{attributes.plan}} {{order}}", **data)
    assert out == "Ann/Ann Lee/Lee ann@x.test Acme pro 7"


def test_template_data_overrides_contact_fields_but_not_system_fields():
    data = recipient_data(contact={"first_name": "Ann"}, email="a@x.test",
                          template_data={"first_name": "Annie", "unsubscribe_url": "http://evil"},
                          system={"unsubscribe_url": "http://ours"})
    assert plain("{{first_name}} {{unsubscribe_url}}", **data) == "Annie http://ours"


def test_system_fields_come_from_workspace_settings_and_the_clock():
    now = dt.datetime(2024, 2, 29, 12, 0, tzinfo=dt.UTC)
    fields = system_fields(workspace={"_id": "w1", "settings": {"company_name": "Acme Ltd"}},
                           contact_id="c1", email="a@x.test", message_id="m1",
                           base_url="https://mail.example", secret_key="k", now=now)
    out = plain("{{company_name}}|{{company_address}}|{{current_year}} {{current_month}} {{current_date}}",
                **fields)
    assert out == "Acme Ltd||2024 February 2024-02-29"
    assert fields["unsubscribe_url"].startswith("https://mail.example/u/")
    assert fields["preferences_url"].startswith("https://mail.example/p/")


# --- conditionals -----------------------------------------------------------------------

OPS = {"==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt,
       ">=": operator.ge, "<=": operator.le}


def cond(expr, **data):
    return plain("{{#if %s}}Y{{else}}N{{/if}}" % expr, **data)


@given(a=st.integers(-1000, 1000) | st.floats(-1e6, 1e6, allow_nan=False),
       b=st.integers(-1000, 1000), op=st.sampled_from(sorted(OPS)))
def test_every_comparison_against_a_number(a, b, op):
    assert cond(f"x {op} {b}", x=a) == ("Y" if OPS[op](a, b) else "N")


@given(a=st.text(st.characters(min_codepoint=97, max_codepoint=122), max_size=6),
       b=st.text(st.characters(min_codepoint=97, max_codepoint=122), max_size=6),
       op=st.sampled_from(sorted(OPS)))
def test_every_comparison_against_a_string(a, b, op):
    assert cond(f"x {op} '{b}'", x=a) == ("Y" if OPS[op](a, b) else "N")
    assert cond(f'x {op} "{b}"', x=a) == ("Y" if OPS[op](a, b) else "N")


@given(a=st.booleans(), b=st.booleans(), op=st.sampled_from(["==", "!="]))
def test_every_equality_against_a_boolean(a, b, op):
    assert cond(f"x {op} {'true' if b else 'false'}", x=a) == ("Y" if OPS[op](a, b) else "N")


def test_comparisons_between_two_fields_and_numeric_strings():
    assert cond("total >= limit", total=10, limit=10) == "Y"
    assert cond("age > 18", age="21") == "Y"
    assert cond("age > 18", age="abc") == "N"
    assert cond("age != 18", age="abc") == "Y"
    assert cond("name > 'b'", name="c") == "Y"
    assert cond("missing > 0") == "N"
    assert cond("missing == null") == "Y"


@pytest.mark.parametrize("value, shown", [(None, "N"), (False, "N"), (0, "N"), ("", "N"), ("  ", "N"),
                                          ([], "N"), ({}, "N"), (True, "Y"), (1, "Y"), ("no", "Y"), ([0], "Y")])
def test_a_bare_condition_follows_handlebars_truthiness(value, shown):
    assert cond("x", x=value) == shown


def test_unless_is_the_negation_and_blocks_nest():
    source = "{{#unless vip}}regular{{else}}{{#if tier == 'gold'}}gold{{else}}vip{{/if}}{{/unless}}"
    assert plain(source, vip=False) == "regular"
    assert plain(source, vip=True, tier="gold") == "gold"
    assert plain(source, vip=True, tier="silver") == "vip"


# --- loops ------------------------------------------------------------------------------

def test_each_exposes_this_properties_and_the_at_variables():
    source = "{{#each items}}{{@index}}:{{this.name}}{{#if @first}}^{{/if}}{{#if @last}}${{/if}};{{/each}}"
    assert plain(source, items=[{"name": "a"}, {"name": "b"}, {"name": "c"}]) == "0:a^;1:b;2:c$;"


@given(items=st.lists(texts, max_size=6))
def test_each_renders_every_item_escaped_in_order(items):
    out = body("{{#each items}}[{{this}}]{{/each}}", items=items)
    assert out == "".join(f"[{escape(i) if i.strip() else ''}]" for i in items)


def test_nested_loops_see_their_own_item_and_index():
    source = "{{#each rows}}{{this.label}}({{#each this.cells}}{{@index}}={{this}}{{/each}}){{/each}}"
    assert plain(source, rows=[{"label": "r1", "cells": ["a", "b"]}, {"label": "r2", "cells": ["c"]}]) \
        == "r1(0=a1=b)r2(0=c)"


def test_a_bare_name_in_a_loop_reads_the_item_first_then_the_root():
    assert plain("{{#each items}}{{name}}-{{shop}} {{/each}}", shop="S", items=[{"name": "a"}, {}]) \
        == "a-S -S "


def test_each_else_renders_for_an_empty_or_missing_list():
    assert plain("{{#each items}}x{{else}}none{{/each}}", items=[]) == "none"
    assert plain("{{#each items}}x{{else}}none{{/each}}") == "none"
    assert plain("{{#each items}}x{{/each}}", items="not a list") == ""


# --- malicious and stray input is inert -------------------------------------------------

@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__ }}", "{{7*7}}", "{% for x in range(10) %}{{ x.y() }}{% endfor %}",
    "{# comment #}", "{% raw %}x{% endraw %}", "{{{triple}}}", "{{}}", "{% endraw %}{{7*7}}",
    "}}{{", "{{'a'|upper}}", "{%- if true -%}yes{%- endif -%}",
    "{{ range(99999999) }}", "{{ request['x'] }}"])
def test_jinja_syntax_written_by_a_user_is_rendered_as_the_text_written(source):
    assert body(source) == source
    assert plain(source) == source


def test_a_name_that_jinja_would_know_is_only_a_data_lookup():
    assert body("[{{ config }}][{{ self }}][{{ range }}][{{ loop }}][{{ lipsum.__globals__ }}]") == "[][][][][]"
    assert body("{{ config }}", config="<mine>") == "&lt;mine&gt;"


def test_jinja_expressions_are_not_evaluated():
    assert body("{{ 7*7 }} {{name}}", name="x") == "{{ 7*7 }} x"


@given(prefix=texts, suffix=texts)
def test_text_without_tags_renders_unchanged(prefix, suffix):
    source = (prefix + "{%" + suffix).replace("{{", "{ {").replace("\r", "")
    assert body(source) == source


def test_dunder_names_are_plain_data_lookups():
    assert plain("[{{__class__}}][{{items.__len__}}][{{this_is_fine}}]", items=[1]) == "[][][]"


# --- malformed tags are refused with a position -----------------------------------------

@pytest.mark.parametrize("source, line, column, words", [
    ("<p>\n  {{#if vip}}yes", 2, 3, "never closed"),
    ("a{{/each}}", 1, 2, "without a matching"),
    ("{{#each items}}{{/if}}", 1, 16, "where {{/each}} was expected"),
    ("x\ny\n{{name||shouting}}", 3, 1, "unknown format"),
    ("{{#with a}}{{/with}}", 1, 1, "unknown block"),
    ("{{else}}", 1, 1, "outside"),
    ("{{#if a ==}}x{{/if}}", 1, 1, "expected a value"),
    ("{{#if a b}}x{{/if}}", 1, 1, "expected one of"),
    ("{{#if}}x{{/if}}", 1, 1, "empty"),
    ("{{@index}}", 1, 1, "only available inside"),
    ("{{#each}}{{/each}}", 1, 1, "needs the name of a list"),
    ("{{a|b|c|d}}", 1, 1, "at most"),
    ("{{#if a}}x{{else}}y{{else}}z{{/if}}", 1, 20, "second"),
    ("{{#if a", 1, 1, "never closed"),
])
def test_malformed_tags_are_rejected_with_line_and_column(source, line, column, words):
    with pytest.raises(MergeTagError) as caught:
        compile_template(source)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert words in caught.value.message
    assert f"line {line}, column {column}" in caught.value.message


def test_compile_content_names_the_field_with_the_error():
    with pytest.raises(MergeTagError) as caught:
        compile_content("Hi {{#if x}}", "<p>ok</p>", None)
    assert caught.value.path == "subject" and caught.value.code == "validation_error"


# --- the footer and the cache -----------------------------------------------------------

def test_footer_is_added_unless_the_html_outputs_the_unsubscribe_url():
    with_footer = compile_content("s", "<html><body><p>Hi</p></body></html>", None)
    _, out, _ = render_content(with_footer, {"unsubscribe_url": "U", "preferences_url": "P",
                                             "company_name": "Acme", "company_address": ""})
    assert out.index('href="U"') < out.index("</body>") and "Acme<br>" in out
    own = compile_content("s", '<p><a href="{{ unsubscribe_url }}">bye</a></p>', None)
    _, out, _ = render_content(own, {"unsubscribe_url": "U"})
    assert out == '<p><a href="U">bye</a></p>'


def test_a_rendered_body_over_the_limit_fails_clearly():
    content = compile_content("s", "{{big}}{{unsubscribe_url}}", None)
    with pytest.raises(ValueError, match="larger than 1 KB"):
        render_content(content, {"big": "x" * 2000}, max_html_bytes=1024)


@settings(max_examples=20)
@given(names)
def test_the_same_source_is_compiled_once(name):
    source = "Hello {{%s}}" % name
    assert compile_template(source) is compile_template(source)
    assert compile_template(source, "text") is not compile_template(source, "html")


@given(st.one_of(st.text(max_size=40), st.integers(-5, 5), st.booleans(), st.none()),
       st.sampled_from(["text", "uppercase", "lowercase", "capitalize"]),
       st.sampled_from(["==", "!=", ">", "<", ">=", "<="]), st.sampled_from(["3", "'abc'", "true"]))
def test_an_interpreted_template_renders_exactly_as_the_compiled_one_does(value, fmt, op, literal):
    """The interpreter (deeply nested templates) and the generated Python must give the
    same output for every value, format and comparison."""
    body = (f"<p>Hi {{{{first_name|friend|{fmt}}}}} &amp; {{{{attributes.city}}}}"
            f"{{{{#if first_name {op} {literal}}}}}yes{{{{else}}}}no{{{{/if}}}}"
            "{{#unless attributes.city}}none{{/unless}}</p>")
    data = {"first_name": value, "attributes": {"city": "<Zürich>"}}
    for mode in ("html", "text"):
        interpreted = CompiledTemplate(body, mode, engine="interpreter")
        compiled = CompiledTemplate(body, mode, engine="python")
        assert interpreted.interpreted and not compiled.interpreted
        assert interpreted.render(data) == compiled.render(data)


# --- nesting, and the two engines ----------------------------------------------------------------

from pipelines.templates.merge_compile import COMPILED_MAX_DEPTH  # noqa: E402
from pipelines.templates.render_budget import MAX_NESTING_DEPTH, RenderBudget  # noqa: E402


def nested(kind: str, depth: int, inner: str = "{{x}}") -> str:
    opening = {"each": "{{#each a}}", "if": "{{#if a}}", "unless": "{{#unless z}}"}
    return opening[kind] * depth + inner + ("{{/%s}}" % kind) * depth


@pytest.mark.parametrize("kind", ["each", "if", "unless"])
def test_blocks_nest_400_deep_and_render(kind):
    out = compile_template(nested(kind, MAX_NESTING_DEPTH)).render({"a": [{"x": "deep"}], "x": "deep"})
    assert out == "deep"


@pytest.mark.parametrize("kind", ["each", "if"])
def test_blocks_nested_deeper_than_400_are_refused_at_the_tag_that_goes_too_deep(kind):
    source = "<p>\n" + nested(kind, 1000)
    with pytest.raises(MergeTagError) as caught:
        compile_template(source)
    width = len(nested(kind, 1).split("{{x}}")[0])
    assert (caught.value.line, caught.value.column) == (2, MAX_NESTING_DEPTH * width + 1)
    assert "nest more than 400 levels deep" in caught.value.message


def test_twenty_one_nested_loops_render_without_a_syntax_error():
    data = {"a": [{"a": [{"a": []}]}], "x": "leaf"}
    source = nested("each", 21, "{{x}}{{@index}}")
    assert compile_template(source).render({"a": [1], "x": "leaf"}) == "leaf0"
    assert compile_template(source).render(data) == ""


def chain(kinds: list[str]) -> str:
    return "".join("{{#%s a}}" % k for k in kinds) + "{{x}}" + "".join("{{/%s}}" % k for k in reversed(kinds))


@pytest.mark.parametrize("pattern", [["each"], ["if"], ["each", "if"]])
def test_templates_up_to_the_compiled_depth_compile_and_deeper_ones_are_interpreted(pattern):
    """Python compiles at most 20 nested loops (and 100 indentation levels): deeper
    templates would be a SyntaxError as generated Python, so they are interpreted."""
    at_limit = chain([pattern[i % len(pattern)] for i in range(COMPILED_MAX_DEPTH - 1)] + ["each"])
    deeper = chain([pattern[i % len(pattern)] for i in range(COMPILED_MAX_DEPTH)] + ["each"])
    data = {"a": [{"x": "y"}], "x": "y"}
    assert not compile_template(at_limit).interpreted
    assert compile_template(deeper).interpreted
    assert compile_template(at_limit).render(data) == compile_template(deeper).render(data) == "y"


_field = st.sampled_from(["a", "b", "c", "a.b", "a.0", "this", "this.a", "this.b", "@index", "@first", "@last"])
_operand = _field | st.sampled_from(["1", "'x'", "true", "null", "0"])


@st.composite
def templates(draw, depth=0, in_loop=False):
    """Random templates using every construct: values with fallbacks and formats, loops
    with else, this, loop variables and bare names read through loop items, if/unless
    with every operator."""
    parts = []
    for _ in range(draw(st.integers(0, 3 if depth < 3 else 1))):
        kind = draw(st.sampled_from(["text", "var", "each", "if"] if depth < 3 else ["text", "var"]))
        if kind == "text":
            parts.append(draw(st.sampled_from(["x", "<b>&", "\r\n", " "])))
        elif kind == "var":
            field = draw(_field.filter(lambda f: in_loop or not (f.startswith("this") or f.startswith("@"))))
            fmt = draw(st.sampled_from(["", "|fb", "||uppercase", "|fb|capitalize"]))
            parts.append("{{%s%s}}" % (field, fmt))
        elif kind == "each":
            field = draw(st.sampled_from(["a", "b", "a.b"] + (["this", "this.a"] if in_loop else [])))
            otherwise = "{{else}}" + draw(templates(depth + 1, in_loop)) if draw(st.booleans()) else ""
            parts.append("{{#each %s}}%s%s{{/each}}" % (field, draw(templates(depth + 1, True)), otherwise))
        else:
            def ok(f):
                return in_loop or not (f.startswith("this") or f.startswith("@"))
            left = draw(_operand.filter(ok))
            cond = left if draw(st.booleans()) else "%s %s %s" % (
                left, draw(st.sampled_from(["==", "!=", ">", "<", ">=", "<="])), draw(_operand.filter(ok)))
            block = draw(st.sampled_from(["if", "unless"]))
            otherwise = "{{else}}" + draw(templates(depth + 1, in_loop)) if draw(st.booleans()) else ""
            parts.append("{{#%s %s}}%s%s{{/%s}}" % (block, cond, draw(templates(depth + 1, in_loop)), otherwise, block))
    return "".join(parts)


_leaf = st.one_of(st.integers(-2, 3), st.booleans(), st.none(), st.sampled_from(["", " ", "x", "<y>", "2", "Ünï"]))
_data_values = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["a", "b", "c", "0"]), inner, max_size=3), max_leaves=10)


@settings(max_examples=400, deadline=None)
@given(templates(), st.dictionaries(st.sampled_from(["a", "b", "c"]), _data_values))
def test_the_interpreter_renders_and_charges_exactly_as_the_generated_python_does(source, data):
    for mode in ("html", "text"):
        results = set()
        for engine in ("python", "interpreter"):
            budget = RenderBudget(steps=10**9)
            out = CompiledTemplate(source, mode, engine=engine).render(data, budget)
            results.add((out, budget.steps_left, budget.chars_left))
        assert len(results) == 1, results
