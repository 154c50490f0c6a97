"""RFC 2369 / RFC 8058 unsubscribe headers for one recipient.

    List-Unsubscribe: <mailto:unsubscribe+MESSAGE_ID@BOUNCE_DOMAIN>, <https://…/u/TOKEN>
    List-Unsubscribe-Post: List-Unsubscribe=One-Click

The HTTPS URL is the one-click endpoint: a mailbox provider POSTs
`List-Unsubscribe=One-Click` to it (front/routes/pages.py) and the recipient is
unsubscribed without seeing a page. The mailto names the message, like the VERP return
path does (a signed token would not fit the 64-octet local part of RFC 5321); message ids
are 128 bits of randomness or a hash of two UUIDs, so they are not guessable either."""

from __future__ import annotations

MAILTO_PREFIX = "unsubscribe+"
MARKETING_KINDS = ("campaign", "automation")


def headers(message: dict, unsubscribe_url: str, *, bounce_domain: str) -> dict[str, str]:
    """The headers for marketing mail (campaign and automation messages); none for
    transactional mail (a receipt or a password reset is not a list one unsubscribes from
    — its footer still links the page)."""
    if message.get("kind") not in MARKETING_KINDS:
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
