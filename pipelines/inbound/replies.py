"""The new text of a reply, without the quoted thread and the signature: mail-parser-reply
(maintained, MIT, headers of the quoted part known in 13 languages) does the finding; this
module only bounds its work and reads HTML-only mail as text first."""

from __future__ import annotations

from mailparser_reply import EmailReplyParser
from mailparser_reply.constants import MAIL_LANGUAGES

from pipelines.inbound.html_view import text_of

# The library's regexes cost time quadratic in a line's length on some texts (measured:
# one 100,000-character line of "On On On …" takes minutes), so it reads at most
# MAX_REPLY_INPUT_CHARS (a reply's new text is at the top) in lines of at most
# MAX_LINE_CHARS (RFC 5322's limit; longer lines are cut in pieces): then 0.8 s at worst.
MAX_REPLY_INPUT_CHARS = 20_000
MAX_LINE_CHARS = 998
_PARSER = EmailReplyParser(languages=list(MAIL_LANGUAGES))


def extract_reply(text: str | None, html: str | None) -> str | None:
    """The latest reply of a message's body (the text part, else its HTML read as text);
    None when there is no body. Falls back to the whole text when the library finds nothing."""
    source = text if text and text.strip() else (text_of(html) if html else None)
    if source is None:
        return None
    source = _bounded(source.replace("\r\n", "\n"))
    try:
        replies = _PARSER.read(source).replies
        reply = replies[0].body if replies else None  # .body: without the quote header and the signature
    except (RecursionError, ValueError, IndexError, TypeError, AttributeError):
        reply = None
    reply = (reply or "").strip()
    return reply or source.strip() or None


def _bounded(text: str) -> str:
    lines: list[str] = []
    for line in text[:MAX_REPLY_INPUT_CHARS].split("\n"):
        lines.extend(line[i:i + MAX_LINE_CHARS] for i in range(0, max(len(line), 1), MAX_LINE_CHARS))
    return "\n".join(lines)
