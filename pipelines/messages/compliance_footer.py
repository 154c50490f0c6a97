"""Rule 9: a compliance footer is appended unless the HTML outputs `{{unsubscribe_url}}`.

The footer is itself merge-tag source, compiled together with the body it is added to,
so it costs nothing extra per recipient and shows the workspace's company name and postal
address when they are set (and nothing when they are not). Marketing mail whose template
places its own `{{unsubscribe_url}}` but not `{{company_address}}` still gets the postal
address (`ADDRESS_HTML` / `ADDRESS_TEXT`). A multi-line address renders as lines
(`pipelines.templates.merge_values.Lines`: `<br>` in HTML)."""

from __future__ import annotations

import re

HTML_FOOTER = (
    '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" '
    'style="border-collapse:collapse;margin:0;">'
    '<tr><td align="center" style="padding:24px 16px;font-family:Arial,Helvetica,sans-serif;'
    'font-size:12px;line-height:18px;color:#6b7280;">'
    '{{#if company_name}}{{company_name}}<br>{{/if}}'
    '{{#if company_address}}{{company_address}}<br>{{/if}}'
    '<a href="{{unsubscribe_url}}" style="color:#6b7280;text-decoration:underline;">Unsubscribe</a>'
    ' &middot; '
    '<a href="{{preferences_url}}" style="color:#6b7280;text-decoration:underline;">Manage preferences</a>'
    '</td></tr></table>')

TEXT_FOOTER = (
    "\n\n--\n"
    "{{#if company_name}}{{company_name}}\n{{/if}}"
    "{{#if company_address}}{{company_address}}\n{{/if}}"
    "Unsubscribe: {{unsubscribe_url}}\n"
    "Manage preferences: {{preferences_url}}\n")

ADDRESS_HTML = (
    '{{#if company_address}}'
    '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" '
    'style="border-collapse:collapse;margin:0;">'
    '<tr><td align="center" style="padding:24px 16px;font-family:Arial,Helvetica,sans-serif;'
    'font-size:12px;line-height:18px;color:#6b7280;">'
    '{{#if company_name}}{{company_name}}<br>{{/if}}{{company_address}}'
    '</td></tr></table>'
    '{{/if}}')

ADDRESS_TEXT = (
    "{{#if company_address}}\n\n--\n"
    "{{#if company_name}}{{company_name}}\n{{/if}}"
    "{{company_address}}\n"
    "{{/if}}")

_BODY_END = re.compile(r"</body\s*>", re.IGNORECASE)


def add_html_footer(html: str, footer: str = HTML_FOOTER) -> str:
    """The footer goes just before the last `</body>`, or at the end of a fragment."""
    ends = list(_BODY_END.finditer(html))
    if not ends:
        return html + footer
    at = ends[-1].start()
    return html[:at] + footer + html[at:]


def add_text_footer(text: str, footer: str = TEXT_FOOTER) -> str:
    return text.rstrip("\n") + footer


def add_html_address(html: str) -> str:
    return add_html_footer(html, ADDRESS_HTML)


def add_text_address(text: str) -> str:
    return add_text_footer(text, ADDRESS_TEXT)
