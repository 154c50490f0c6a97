"""The render budget, as a sender meets it: templates that would take hours or gigabytes
end at once with a reason; everything a real email does still renders; and what is sure
to go over is known from the request alone."""

import datetime as dt
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.core.errors import ValidationFailed
from pipelines.templates.loop_cost import certain_overrun, certain_steps
from pipelines.templates.merge_compile import CompiledTemplate
from pipelines.templates.merge_tags import parse
from pipelines.templates.personalise import (
    SYSTEM_FIELDS,
    check_merge_tags,
    compile_content,
    render_content,
    system_fields,
)
from pipelines.templates.render_budget import MAX_LOOP_STEPS, RenderBudget, RenderBudgetExceeded, RenderedTooLarge

ENGINES = ("python", "interpreter")
THREE_NESTED = "{{#each items}}{{#each items}}{{#each items}}<td>{{this}}</td>{{/each}}{{/each}}{{/each}}"


def render(source, data, engine, budget=None):
    return CompiledTemplate(source, "html", engine=engine).render(data, budget)


def peak_bytes(fn) -> int:
    """Peak memory allocated while `fn` runs (a budget failure ends it like a return)."""
    tracemalloc.start()
    try:
        fn()
    except RenderBudgetExceeded:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# --- the hostile templates of the fault report: each ends early, memory bounded ---------------

@pytest.mark.parametrize("engine", ENGINES)
def test_three_nested_loops_over_600_items_stop_at_the_output_limit(engine):
    with pytest.raises(RenderedTooLarge, match="the rendered output is larger than 256 KB"):
        render(THREE_NESTED, {"items": list(range(600))}, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_two_nested_loops_over_4000_items_stop_before_running_the_inner_loops(engine):
    budget = RenderBudget()
    source = "{{#each items}}{{#each items}}{{this}}{{/each}}{{/each}}"
    peak = peak_bytes(lambda: render(source, {"items": list(range(4000))}, engine, budget))
    assert budget.steps_left < 0                         # it was the step budget that stopped it
    assert peak < 8 * 1024 * 1024                        # not 632 MB
    with pytest.raises(RenderBudgetExceeded, match="loops need more than 100,000 steps"):
        render(source, {"items": list(range(4000))}, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_four_nested_loops_over_1000_items_end_with_a_clear_reason(engine):
    source = "{{#each a}}{{#each a}}{{#each a}}{{#each a}}x{{/each}}{{/each}}{{/each}}{{/each}}"
    budget = RenderBudget()
    with pytest.raises(RenderBudgetExceeded) as caught:
        render(source, {"a": list(range(1000))}, engine, budget)
    assert "more than 100,000 steps for this message" in str(caught.value)
    # charged as each loop starts: it stopped within the fourth level's first loop, with
    # at most one budget's worth of work done (not 10^12 iterations)
    assert -MAX_LOOP_STEPS * 20 < budget.steps_left < 0


@pytest.mark.parametrize("engine", ENGINES)
def test_output_stops_growing_at_the_limit_however_large_the_values(engine):
    data = {"a": list(range(1000)), "blob": "x" * 100_000}
    peak = peak_bytes(lambda: render("{{#each a}}{{blob}}{{/each}}", data, engine))
    assert peak < 2 * 1024 * 1024                        # not 100 MB
    literal = "{{#each a}}" + "y" * 1000 + "{{/each}}"   # literal text inside a loop counts too
    peak = peak_bytes(lambda: render(literal, data, engine))
    assert peak < 2 * 1024 * 1024
    with pytest.raises(RenderedTooLarge):
        render(literal, data, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_loop_of_tags_that_write_nothing_is_still_bounded(engine):
    """Steps count the tags a loop evaluates, not only its iterations, so a body of many
    empty tags cannot run a hundred thousand times."""
    source = "{{#each a}}" + "{{#if x}}y{{/if}}{{nothing}}" * 50 + "{{/each}}"
    with pytest.raises(RenderBudgetExceeded, match="steps"):
        render(source, {"a": [0] * 1000}, engine)
    assert render(source, {"a": [0] * 100}, engine) == ""


# --- what real emails do still renders ---------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_a_loop_exactly_at_the_step_budget_renders_and_one_more_iteration_fails(engine):
    assert render("{{#each a}}{{/each}}", {"a": [0] * MAX_LOOP_STEPS}, engine) == ""
    with pytest.raises(RenderBudgetExceeded):
        render("{{#each a}}{{/each}}", {"a": [0] * (MAX_LOOP_STEPS + 1)}, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_large_order_table_renders_within_the_budget(engine):
    source = ("<table>{{#each lines}}<tr><td>{{@index}}</td><td>{{this.sku}}</td><td>{{this.name}}</td>"
              "<td>{{this.qty}}</td><td>{{this.price}}</td>{{#if this.gift}}<td>gift</td>{{/if}}</tr>{{/each}}</table>")
    lines = [{"sku": f"S{i}", "name": f"Item {i}", "qty": i % 5, "price": "9.99", "gift": i % 7 == 0}
             for i in range(2000)]
    out = render(source, {"lines": lines}, engine)
    assert out.count("<tr>") == 2000 and out.count("gift") == 286


@pytest.mark.parametrize("engine", ENGINES)
def test_literal_text_in_a_branch_counts_only_when_the_branch_is_taken(engine):
    source = "{{#each a}}{{#if this}}" + "z" * 10_000 + "{{else}}.{{/if}}{{/each}}"
    data = {"a": [True] * 5 + [False] * 5000}             # 50 KB taken, 50 MB if each branch counted its most
    assert render(source, data, engine) == "z" * 50_000 + "." * 5000


def test_the_step_budget_is_shared_by_the_parts_of_one_message():
    loop = "{{#each a}}{{/each}}"
    half = {"a": [0] * (MAX_LOOP_STEPS // 2 + 1), "unsubscribe_url": "U"}
    content = compile_content(loop, loop + "{{unsubscribe_url}}", None)
    with pytest.raises(RenderBudgetExceeded, match="steps"):
        render_content(content, half)
    _, html, _ = render_content(compile_content("s", loop + "{{unsubscribe_url}}", None), half)
    assert html == "U"


def test_each_part_stops_at_its_own_limit_with_its_name():
    content = compile_content("{{#each a}}{{x}}{{/each}}", "<p>ok</p>{{unsubscribe_url}}",
                              "{{#each a}}{{x}}{{/each}}")
    with pytest.raises(RenderedTooLarge, match="the rendered subject is larger than 1 KB"):
        render_content(content, {"a": [0] * 100, "x": "y" * 20}, max_html_bytes=1024)
    content = compile_content("s", "<p>ok</p>{{unsubscribe_url}}", "{{#each a}}{{x}}{{/each}}{{unsubscribe_url}}")
    with pytest.raises(RenderedTooLarge, match="the rendered text body is larger than 1 KB"):
        render_content(content, {"a": [0] * 100, "x": "y" * 20}, max_html_bytes=1024)


def test_the_size_limit_is_in_bytes_however_few_characters_they_are():
    content = compile_content("s", "{{x}}{{unsubscribe_url}}", None)
    with pytest.raises(RenderedTooLarge, match="HTML body is larger than 1 KB"):
        render_content(content, {"x": "é" * 600, "unsubscribe_url": "U"}, max_html_bytes=1024)  # 600 chars, 1200 bytes
    _, html, _ = render_content(content, {"x": "é" * 500, "unsubscribe_url": "U"}, max_html_bytes=1024)
    assert len(html.encode()) == 1001


# --- known at send time ------------------------------------------------------------------------

def test_loops_over_a_request_list_that_must_go_over_are_refused_naming_the_list():
    with pytest.raises(ValidationFailed) as caught:
        check_merge_tags("Hi", "<table>" + THREE_NESTED + "</table>", None,
                         template_data={"items": list(range(600))}, path_prefix="messages[2].")
    assert caught.value.path == "messages[2].template_data.items"
    assert "more than 100,000 steps" in caught.value.message
    with pytest.raises(ValidationFailed) as caught:   # the loops of the stored template count too
        check_merge_tags("Hi", None, None, template_html="{{#each order.lines}}{{#each order.lines}}{{/each}}{{/each}}",
                         template_data={"order": {"lines": list(range(400))}})
    assert caught.value.path == "template_data.order.lines"


def test_a_stored_template_that_breaks_a_newer_rule_is_named_by_its_template_id():
    from pipelines.templates.merge_tags import MergeTagError
    with pytest.raises(MergeTagError) as caught:
        check_merge_tags("Hi", None, None, template_html="{{#if a}}" * 401 + "{{/if}}" * 401,
                         template_data={"items": [1]}, path_prefix="messages[0].")
    assert caught.value.path == "messages[0].template_id"


@pytest.mark.parametrize("html", [
    "{{#if big}}" + THREE_NESTED + "{{/if}}",                      # may not run
    "{{#each attributes.items}}{{#each attributes.items}}{{/each}}{{/each}}",   # the contact's list
    "{{#each rows}}{{#each items}}{{#each items}}{{/each}}{{/each}}{{/each}}",  # items read from each row
    THREE_NESTED.replace("items", "unsubscribe_url"),              # a system field wins over template_data
    "{{#each items}}{{this}}{{/each}}",                            # 600 steps only
])
def test_what_might_stay_within_the_budget_is_left_to_the_render(html):
    data = {"items": list(range(600)), "rows": [{"items": []}], "unsubscribe_url": list(range(600))}
    check_merge_tags("Hi", html, None, template_data=data)


def test_the_system_fields_are_the_ones_rendering_fills():
    system = system_fields(workspace={"_id": "w"}, contact_id=None, email="a@b.test", message_id="m",
                           base_url="https://x.test", secret_key="k", now=dt.datetime(2025, 6, 1))
    assert SYSTEM_FIELDS == set(system)


_names = st.sampled_from(["a", "b", "c"])


@st.composite
def loop_templates(draw, depth=0, in_loop=False):
    """Random bodies of loops, conditions and values over the names a, b, c."""
    parts = []
    kinds = ["text", "var", "each", "if"] + (["this"] if in_loop else [])
    for _ in range(draw(st.integers(0, 3 if depth < 3 else 1))):
        kind = draw(st.sampled_from(kinds if depth < 3 else ["text", "var"]))
        name = draw(_names)
        if kind == "text":
            parts.append(draw(st.sampled_from(["x", "<p>", ""])))
        elif kind == "var":
            parts.append("{{%s}}" % name)
        elif kind == "this":
            parts.append("{{#each this.%s}}%s{{/each}}" % (name, draw(loop_templates(depth + 1, True))))
        elif kind == "if":
            parts.append("{{#if %s}}%s{{else}}%s{{/if}}" % (name, draw(loop_templates(depth + 1, in_loop)),
                                                            draw(loop_templates(depth + 1, in_loop))))
        else:
            parts.append("{{#each %s}}%s{{/each}}" % (name, draw(loop_templates(depth + 1, True))))
    return "".join(parts)


@st.composite
def programs(draw):
    """A template with at least one loop at the top."""
    return "{{#each %s}}%s{{/each}}%s" % (draw(_names), draw(loop_templates(1, True)), draw(loop_templates()))


_values = st.recursive(st.integers(0, 3) | st.booleans(),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_names, inner, max_size=3),
                       max_leaves=12)
_data = st.dictionaries(_names, st.lists(_values, min_size=1, max_size=4) | _values, min_size=1)


@settings(max_examples=300, deadline=None)
@given(programs(), _data)
def test_the_certain_steps_never_exceed_what_rendering_charges(source, data):
    spent = set()
    for engine in ENGINES:   # both engines charge the same
        budget = RenderBudget(steps=10**9)
        render(source, data, engine, budget)
        spent.add((budget.max_steps - budget.steps_left, budget.chars_left))
    [(steps, _)] = spent
    certain, _ = certain_steps([parse(source)], data, 10**9)
    assert certain <= steps
    if certain_overrun([parse(source)], data, certain - 1) is not None:
        with pytest.raises(RenderBudgetExceeded):
            render(source, data, "python", RenderBudget(steps=certain - 1))
