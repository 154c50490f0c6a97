"""The realistic newsletter bench/render, bench/send and the bare baseline share: ~20 KB of
HTML with 12 merge tags, one {{#if}} and a 5-item {{#each}}, and per-recipient data."""

from __future__ import annotations

import random

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
            + loop.replace("ROW", row) + "</table>\n" + FILLER * 25 + footer
            + "</td></tr></table></td></tr></table></body></html>")


# 12 simple tags + 1 conditional + 1 loop (bench/render writes it in two more dialects).
OURS = _layout(
    "<h1>Hello {{firstName|there}} {{lastName||uppercase}}</h1><p>Account {{email}} at {{company}}, "
    "{{attributes.city}}. Order {{order_id}}, {{current_month}} {{current_year}}.</p>\n",
    "<tr><td>{{@index}}</td><td>{{this.name}}</td><td>{{this.price}}</td></tr>",
    "{{#each items}}ROW{{/each}}",
    "{{#if total >= 100}}<p>Free shipping on {{total}}!</p>{{else}}<p>Spend 100 for free shipping.</p>{{/if}}\n",
    "<p>{{company_name}}, {{company_address}}. <a href=\"{{unsubscribe_url}}\">Unsubscribe</a> "
    "<a href=\"{{preferences_url}}\">Preferences</a></p>")


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
