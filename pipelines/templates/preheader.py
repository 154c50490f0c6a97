"""The preheader: the line a mail client shows after the subject in the inbox. It goes
first in the body, hidden from the opened email (the usual hidden-div technique)."""

from __future__ import annotations

import html as html_lib
import re

_BODY_OPEN = re.compile(r"<body\b[^>]*>", re.IGNORECASE)
_STYLE = ("display:none;font-size:1px;line-height:1px;max-height:0;max-width:0;opacity:0;"
          "overflow:hidden;mso-hide:all")


def with_preheader(html: str, text: str) -> str:
    """`html` with `text` (escaped) as its hidden preheader, right after `<body>` (or first)."""
    if not text.strip():
        return html
    block = f'<div style="{_STYLE}">{html_lib.escape(text)}</div>'
    match = _BODY_OPEN.search(html)
    if match is None:
        return block + html
    return html[:match.end()] + block + html[match.end():]
