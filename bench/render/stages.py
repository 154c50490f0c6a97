"""Per-message cost of what the send path pays in the render actor, by stage: merge (the
message's fields, subject and HTML filled), text (the plain-text alternative), MIME
(the message's bytes) and DKIM (the signature), and the whole `render_one` as the actor
calls it. Messages are bench/send's: one stored ~20 KB template, each recipient's own
template_data, a workspace with company fields, the shared DKIM key, no tracking.

    .venv/bin/python -m bench.render --stages [--contacts 2000] [--repeat 3]

Each stage is timed over all messages on its own (CPU time, best of --repeat), fed the
previous stage's output, so the stages add up to about the whole."""

from __future__ import annotations

import datetime as dt
import time

from bench.newsletter import OURS
from bench.stack import TEMPLATE_SUBJECT, recipients
from pipelines.core.settings import Settings
from pipelines.messages import dkim
from pipelines.messages.mail_streams import shared_headers
from pipelines.messages.mime import compose
from pipelines.templates.personalise import render_content, stored_template_data
from pipelines.templates.render_message import (
    RenderContext,
    message_content,
    message_data,
    origination_date,
    render_one,
    rendered_parts,
)
from pipelines.templates.text import html_to_text

SETTINGS = Settings(secret_key="k" * 32)
WORKSPACE = {"_id": "ws1", "settings": {"company_name": "Shop Ltd", "company_address": "1 Main St\nSpringfield"}}


def messages(count: int) -> list[dict]:
    created = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).isoformat()
    return [{"_id": f"msg{i:06d}", "workspace_id": "ws1", "to": [to], "subject": TEMPLATE_SUBJECT,
             "from_address": "news@postroom.test", "from_name": "Acme", "template_id": "t1", "template_version": 1,
             **stored_template_data(data), "status": "queued", "created_at": created}
            for i, (to, data) in enumerate(recipients(count))]


def context() -> RenderContext:
    signer = dkim.Signer("postroom.test", "pr1", dkim._load_private_key(dkim.generate_key_pair().private_pem))
    return RenderContext(settings=SETTINGS, workspaces={"ws1": WORKSPACE}, signers={dkim.SHARED: signer},
                         templates={("t1", 1): {"html": OURS}})


def _best(fn, items: list, repeat: int) -> tuple[float, list]:
    best, out = float("inf"), []
    for _ in range(repeat):
        start = time.process_time()
        out = [fn(item) for item in items]
        best = min(best, time.process_time() - start)
    return best * 1000 / len(items), out


def run(count: int, repeat: int) -> None:
    ctx, docs = context(), messages(count)
    signer = ctx.signers[dkim.SHARED]

    def merge(m):
        return m, rendered_parts(m, ctx)

    def merge_without_text(m):
        return render_content(message_content(m, ctx), message_data(m, ctx), max_html_bytes=SETTINGS.max_html_bytes)

    def text_old(pair):
        m, (subject, html, text, fields) = pair
        return html_to_text(html)

    def mime(triple):
        m, (subject, html, text, fields), derived = triple
        return compose(message_id=m["_id"], from_address=m["from_address"], from_name=m["from_name"], to=m["to"],
                       subject=subject, html=html, text=derived if text is None else text, reply_to=None,
                       id_domain="postroom.test",
                       extra_headers=shared_headers(m, "postroom.test"), date=origination_date(m))

    def sign(data):
        return signer.sign(data)

    message_content(docs[0], ctx)  # compiled once, as the actor's first message does
    rows = {}
    rows["merge (fields, subject, HTML; text if compiled)"], merged = _best(merge, docs, repeat)
    rows["  the same without the text"], _ = _best(merge_without_text, docs, repeat)
    rows["text by per-message derivation (the old way)"], derived = _best(text_old, merged, repeat)
    with_text = [(*parts, text) for parts, text in zip(merged, derived, strict=True)]
    rows["MIME (compose, text given)"], composed = _best(mime, with_text, repeat)
    rows["DKIM (sign)"], _ = _best(sign, composed, repeat)
    rows["whole render_one"], _ = _best(lambda m: render_one(m, ctx), docs, repeat)
    print(f"per message, {count} messages, best of {repeat} (CPU ms):")
    for name, ms in rows.items():
        print(f"  {name:<50} {ms:7.3f} ms")
