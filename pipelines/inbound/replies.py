"""The new text of a reply, without the quoted thread and the signature: mail-parser-reply
(maintained, MIT, headers of the quoted part known in 13 languages) does the finding; this
module only bounds its work and reads HTML-only mail as text first."""

from __future__ import annotations

from mailparser_reply import EmailReplyParser
from mailparser_reply.constants import MAIL_LANGUAGES

from pipelines.templates.text import html_to_text

# The library's regexes run over the whole text: a hostile body of megabytes would hold the
# caller; a reply's new text is at the top, so the first 100,000 characters are enough.
MAX_REPLY_INPUT_CHARS = 100_000
_PARSER = EmailReplyParser(languages=list(MAIL_LANGUAGES))


def extract_reply(text: str | None, html: str | None) -> str | None:
    """The latest reply of a message's body (the text part, else its HTML read as text);
    None when there is no body. Falls back to the whole text when the library finds nothing."""
    source = text if text and text.strip() else (html_to_text(html) if html else None)
    if source is None:
        return None
    source = source.replace("\r\n", "\n")[:MAX_REPLY_INPUT_CHARS]
    try:
        reply = _PARSER.parse_reply(source)
    except (RecursionError, ValueError, IndexError, TypeError, AttributeError):
        reply = None
    reply = (reply or "").strip()
    return reply or source.strip() or None
