"""Render throughput of the merge-tag pipeline against two baselines, same run, same data.

    .venv/bin/python -m bench.render [--contacts 10000] [--repeat 3]

A ~20 KB newsletter with a dozen merge tags, one conditional and a five-item loop is
rendered once per contact by
  1. ours: merge-tag source compiled once (pipelines.merge_compile), rendered N times;
  2. the ceiling: the same template hand-written in Jinja2 (plain Environment, autoescape);
  3. the floor: str.replace of each tag with its escaped value (the conditional and the
     loop hand-expanded in Python), the least work any approach can do.
All three must produce identical HTML for every contact (checked), so the figures compare
equal work. Best of --repeat runs is reported; the process is single-threaded."""

from __future__ import annotations

import argparse
import random
import re
import time

import jinja2
from markupsafe import escape

from pipelines.merge_compile import compile_template

FILLER = ("<p style=\"margin:0 0 16px;font-family:Arial,Helvetica,sans-serif;font-size:16px;line-height:24px;"
          "color:#374151;\">Spring is here and so is our new collection. We picked the pieces our readers "
          "asked about most this winter: light jackets, linen shirts, and the walking shoes that sold out "
          "twice. Every order ships in recycled packaging, and returns stay free for thirty days.</p>\n")


def _layout(greeting: str, row: str, loop: str, conditional: str, footer: str) -> str:
    head = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Newsletter</title></head>"
            "<body style=\"margin:0;padding:0;background:#f4f4f5;\"><table role=\"presentation\" width=\"100%\" "
            "cellpadding=\"0\" cellspacing=\"0\" border=\"0\"><tr><td align=\"center\">"
            "<table role=\"presentation\" width=\"600\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\" "
            "style=\"background:#ffffff;\"><tr><td style=\"padding:24px;\">\n")
    return (head + greeting + FILLER * 25 + conditional + "<table role=\"presentation\" width=\"100%\">"
            + loop.replace("ROW", row) + "</table>\n" + FILLER * 25 + footer + "</td></tr></table></td></tr></table></body></html>")


# 12 simple tags + 1 conditional + 1 loop, in three dialects.
OURS = _layout(
    "<h1>Hello {{firstName|there}} {{lastName||uppercase}}</h1><p>Account {{email}} at {{company}}, "
    "{{attributes.city}}. Order {{order_id}}, {{current_month}} {{current_year}}.</p>\n",
    "<tr><td>{{@index}}</td><td>{{this.name}}</td><td>{{this.price}}</td></tr>",
    "{{#each items}}ROW{{/each}}",
    "{{#if total >= 100}}<p>Free shipping on {{total}}!</p>{{else}}<p>Spend 100 for free shipping.</p>{{/if}}\n",
    "<p>{{company_name}}, {{company_address}}. <a href=\"{{unsubscribe_url}}\">Unsubscribe</a> "
    "<a href=\"{{preferences_url}}\">Preferences</a></p>")

HAND_JINJA = _layout(
    "<h1>Hello {{ firstName or 'there' }} {{ lastName|upper }}</h1><p>Account {{ email }} at {{ company }}, "
    "{{ attributes.city }}. Order {{ order_id }}, {{ current_month }} {{ current_year }}.</p>\n",
    "<tr><td>{{ loop.index0 }}</td><td>{{ item.name }}</td><td>{{ item.price }}</td></tr>",
    "{% for item in items %}ROW{% endfor %}",
    "{% if total >= 100 %}<p>Free shipping on {{ total }}!</p>{% else %}<p>Spend 100 for free shipping.</p>{% endif %}\n",
    "<p>{{ company_name }}, {{ company_address }}. <a href=\"{{ unsubscribe_url }}\">Unsubscribe</a> "
    "<a href=\"{{ preferences_url }}\">Preferences</a></p>")

FLOOR = _layout(
    "<h1>Hello [firstName] [lastName]</h1><p>Account [email] at [company], [city]. Order [order_id], "
    "[current_month] [current_year].</p>\n",
    "<tr><td>[i]</td><td>[name]</td><td>[price]</td></tr>",
    "[ITEMS]",
    "[IF]\n",
    "<p>[company_name], [company_address]. <a href=\"[unsubscribe_url]\">Unsubscribe</a> "
    "<a href=\"[preferences_url]\">Preferences</a></p>")
FLOOR_ROW = "<tr><td>[i]</td><td>[name]</td><td>[price]</td></tr>"
SIMPLE = ("email", "company", "order_id", "current_month", "current_year", "company_name", "company_address",
          "unsubscribe_url", "preferences_url")


def floor_render(d: dict) -> str:
    out = FLOOR.replace("[firstName]", str(escape(d["firstName"] or "there")))
    out = out.replace("[lastName]", str(escape(d["lastName"].upper())))
    out = out.replace("[city]", str(escape(d["attributes"]["city"])))
    for name in SIMPLE:
        out = out.replace(f"[{name}]", str(escape(d[name])))
    total = d["total"]
    out = out.replace("[IF]", f"<p>Free shipping on {escape(total)}!</p>" if total >= 100
                      else "<p>Spend 100 for free shipping.</p>")
    rows = "".join(FLOOR_ROW.replace("[i]", str(i)).replace("[name]", str(escape(item["name"])))
                   .replace("[price]", str(escape(item["price"]))) for i, item in enumerate(d["items"]))
    return out.replace("[ITEMS]", rows)


_SPLIT = re.split(r"\[([A-Za-z_]+)\]", FLOOR)  # literal, name, literal, name, ...


def join_render(d: dict) -> str:
    """Context, not a required baseline: each str.replace copies the whole 20 KB string, so
    twelve of them cost more than Jinja2's single join; one join of pre-split pieces is the
    real lower bound of substitution."""
    total = d["total"]
    values = {name: str(escape(d[name])) for name in SIMPLE}
    values.update(firstName=str(escape(d["firstName"] or "there")), lastName=str(escape(d["lastName"].upper())),
                  city=str(escape(d["attributes"]["city"])),
                  IF=f"<p>Free shipping on {escape(total)}!</p>" if total >= 100
                  else "<p>Spend 100 for free shipping.</p>",
                  ITEMS="".join(f"<tr><td>{i}</td><td>{escape(item['name'])}</td><td>{escape(item['price'])}</td></tr>"
                                for i, item in enumerate(d["items"])))
    parts = _SPLIT[:]
    for i in range(1, len(parts), 2):
        parts[i] = values[parts[i]]
    return "".join(parts)


def contacts(n: int) -> list[dict]:
    rng = random.Random(7)
    first = ["Ann", "Bob", "Chloé", "Dev", "", "Eve & Co", "Fran<k>"]
    rows = []
    for i in range(n):
        rows.append({
            "firstName": rng.choice(first), "lastName": rng.choice(["Lee", "o'Brien", "Smith", "Nguyen"]),
            "email": f"reader{i}@example.org", "company": rng.choice(["Acme", "Initech", "Globex \"GX\""]),
            "attributes": {"city": rng.choice(["Paris", "Lagos", "Lima", "Osaka"])},
            "order_id": f"A-{100000 + i}", "total": rng.randint(20, 200),
            "current_month": "June", "current_year": "2025", "company_name": "Shop Ltd",
            "company_address": "1 Main St, Springfield",
            "unsubscribe_url": f"https://mail.example/u/tok{i}", "preferences_url": f"https://mail.example/p/tok{i}",
            "items": [{"name": f"Item {k} <{rng.randint(1, 9)}>", "price": f"{rng.randint(5, 90)}.00 EUR"}
                      for k in range(5)],
        })
    return rows


def best_rate(render, data: list[dict], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for d in data:
            render(d)
        best = min(best, time.perf_counter() - start)
    return len(data) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contacts", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = contacts(args.contacts)

    compiled_at = time.perf_counter()
    ours = compile_template(OURS, "html")
    compile_ms = (time.perf_counter() - compiled_at) * 1000
    hand = jinja2.Environment(autoescape=True).from_string(HAND_JINJA)
    for d in data[:200]:  # the three must agree before their speeds mean anything
        a, b, c = ours.render(d), hand.render(**d), floor_render(d)
        assert a == b == c == join_render(d), "renderers disagree"

    rates = {
        "ours (merge tags → sandboxed Jinja2)": best_rate(ours.render, data, args.repeat),
        "hand-written Jinja2 (ceiling)": best_rate(lambda d: hand.render(**d), data, args.repeat),
        "str.replace (floor)": best_rate(floor_render, data, args.repeat),
        "(context: pre-split join, no replace)": best_rate(join_render, data, args.repeat),
    }
    print(f"template: {len(OURS.encode()) / 1024:.1f} KB source, {len(ours.render(data[0]).encode()) / 1024:.1f} KB "
          f"rendered, 12 tags + 1 conditional + 5-item loop; {args.contacts} contacts, best of {args.repeat}; "
          f"compile once: {compile_ms:.1f} ms")
    for name, rate in rates.items():
        print(f"  {name:<40} {rate:>10,.0f} renders/s")
    ours_rate, hand_rate = list(rates.values())[:2]
    print(f"  ours / hand-written Jinja2 = {ours_rate / hand_rate:.2f}  "
          f"(hand-written is {hand_rate / ours_rate:.2f}x ours; target ≤ 1.5x)")


if __name__ == "__main__":
    main()
