"""Two streams of mail, kept apart as mailbox providers and the law expect.

- **marketing**: campaigns, and email API mail sent with `stream: "marketing"`. An
  unsubscribe holds it back; it carries `List-Id` and (one recipient) the one-click
  `List-Unsubscribe` headers; its body always shows the postal address.
- **transactional**: everything else the email API sends (receipts, password resets). A
  marketing unsubscribe (suppression reason `unsubscribe`) does not hold it back.

Hard and soft bounces, complaints and manual suppressions hold back both streams.

Every message carries Gmail's `Feedback-ID: <campaign id | automation id | api>:<workspace id>:<stream>:postroom`
(the last field is the sender id, constant for the service; the others let complaint
rates be told apart per campaign or automation, customer and stream)."""

from __future__ import annotations

MARKETING = "marketing"
TRANSACTIONAL = "transactional"
SENDER_ID = "postroom"
# Suppression reasons that are a marketing opt-out, not a reason to stop a password reset.
MARKETING_ONLY_REASONS = frozenset({"unsubscribe"})


# Message kinds that are always marketing mail (a campaign's, an automation's email step).
MARKETING_KINDS = ("campaign", "automation")


def stream_of(message: dict) -> str:
    if message.get("kind") in MARKETING_KINDS:
        return MARKETING
    return message.get("stream") or TRANSACTIONAL


def holds_back(stream: str, reason: str) -> bool:
    """Whether a suppression with this reason keeps mail of this stream from the address."""
    return stream == MARKETING or reason not in MARKETING_ONLY_REASONS


def blocked_addresses(stream: str, reasons: dict[str, str]) -> set[str]:
    """Of {address: suppression reason}, the addresses mail of `stream` may not go to."""
    return {address for address, reason in reasons.items() if holds_back(stream, reason)}


def feedback_id(message: dict) -> str:
    source = message.get("campaign_id") or message.get("automation_id") or "api"
    return f"{source}:{message['workspace_id']}:{stream_of(message)}:{SENDER_ID}"


def list_id(message: dict, signing_domain: str) -> str:
    """RFC 2919: one list per workspace — an unsubscribe applies to all of a workspace's
    marketing mail, so that is the list a recipient filters on and leaves; its namespace is
    the domain the mail is signed for."""
    return f"<{message['workspace_id']}.{signing_domain}>"


def shared_headers(message: dict, signing_domain: str) -> dict[str, str]:
    """The headers every message of this campaign (or workspace and stream) shares."""
    headers = {"Feedback-ID": feedback_id(message)}
    if stream_of(message) == MARKETING:
        headers["List-Id"] = list_id(message, signing_domain)
    return headers
