"""RFC 2369 / RFC 8058 unsubscribe headers for one recipient.

    List-Unsubscribe: <mailto:unsubscribe+MESSAGE_ID@BOUNCE_DOMAIN>, <https://…/u/TOKEN>
    List-Unsubscribe-Post: List-Unsubscribe=One-Click

The HTTPS URL is the one-click endpoint: a mailbox provider POSTs
`List-Unsubscribe=One-Click` to it (front/routes/pages.py) and the recipient is
unsubscribed without seeing a page. The mailto names the message, like the VERP return
path does (a signed token would not fit the 64-octet local part of RFC 5321); message ids
are 128 bits of randomness or a hash of two UUIDs, so they are not guessable either."""

from __future__ import annotations

from pipelines.audience.recipients import envelope
from pipelines.messages.mail_streams import MARKETING, stream_of

MAILTO_PREFIX = "unsubscribe+"


def headers(message: dict, unsubscribe_url: str, *, bounce_domain: str) -> dict[str, str]:
    """The headers for marketing mail to one recipient (campaign and automation mail always is); none for
    transactional mail (a receipt or a password reset is not a list one unsubscribes from),
    nor for a message to several addresses, whose one-click link could not say whom to
    unsubscribe (its footer's page asks)."""
    if stream_of(message) != MARKETING or len(envelope(message)) != 1:
        return {}
    return {
        "List-Unsubscribe": f"<mailto:{MAILTO_PREFIX}{message['_id']}@{bounce_domain}>, <{unsubscribe_url}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }


def message_id_from_mailto(address: str) -> str | None:
    """The message id of an `unsubscribe+MESSAGE_ID@…` address, or None."""
    local = address.split("@", 1)[0]
    if local.lower().startswith(MAILTO_PREFIX) and len(local) > len(MAILTO_PREFIX):
        return local[len(MAILTO_PREFIX):]
    return None
