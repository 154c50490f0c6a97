"""The `email.received` event: what a route's receiver (and a workspace webhook
subscribed to the event) is posted for one message received at one inbound address, and
what of it the store keeps.

Attachments travel in the event as base64 (`content_b64`) while each is under the
parser's inline limit (256 KiB) and all of them together under EVENT_ATTACHMENT_BYTES;
past that an attachment comes without its bytes (`content_omitted: true`: they are in
the raw message, GET /inbound/messages/:id/raw); bodies and headers past BODY_CHARACTERS
likewise (`bodies_omitted: true`). The stored parsed message never keeps
attachment bytes (the raw message has them)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

EVENT = "email.received"
# Base64 bytes of attachments carried in one event, at most (the whole delivery body is
# stored with each delivery and posted on every attempt).
EVENT_ATTACHMENT_BYTES = 5 * 1024 * 1024
# The bodies (text, html, html_sanitised, reply) and headers of one parsed message, at most,
# as JSON characters: past it they are left out (`bodies_omitted: true`; the raw message has
# them), so no event, delivery or stored message nears the store's 16 MB document limit
# whatever a 10 MiB message holds.
BODY_CHARACTERS = 4 * 1024 * 1024
_BODIES = ("text", "html", "html_sanitised", "reply")


def as_json(value: Any) -> Any:
    """A parser or verdict value (dataclasses, mappings, lists) as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return as_json(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    return value


def event_attachments(attachments: list[dict]) -> list[dict]:
    """The attachments with their bytes while the event's budget lasts."""
    left, out = EVENT_ATTACHMENT_BYTES, []
    for attachment in attachments:
        content = attachment.get("content_b64")
        if content is not None and len(content) <= left:
            left -= len(content)
            out.append(attachment)
        else:
            out.append({**{k: v for k, v in attachment.items() if k != "content_b64"}, "content_omitted": True})
    return out


def bounded(parsed: dict) -> dict:
    """The parsed message, its bodies and headers left out when together they pass
    BODY_CHARACTERS (the first thing processing does with the parser's answer)."""
    size = sum(len(parsed.get(k) or "") for k in _BODIES) + len(json.dumps(parsed.get("headers") or []))
    if size <= BODY_CHARACTERS:
        return parsed
    return {**parsed, **{k: None for k in _BODIES}, "headers": [], "bodies_omitted": True}


def stored_parse(parsed: dict) -> dict:
    """The parsed message as the store keeps it: attachments without their bytes."""
    attachments = [{k: v for k, v in a.items() if k != "content_b64"} for a in parsed.get("attachments") or []]
    return {**parsed, "attachments": attachments}


def event_data(message: dict, parsed: dict, authentication: dict, route: dict | None) -> dict:
    """`data` of the event for the stored inbound `message` (its envelope), as parsed."""
    return {
        "inbound_message_id": message["_id"],
        "received_at": message["received_at"],
        "recipient": message["recipient"],
        "tag": message["tag"],
        "route": None if route is None else {"id": route["_id"], "pattern": route["pattern"]},
        "envelope": envelope(message),
        "auto_submitted": bool(parsed.get("auto_submitted")),
        "authentication": authentication,
        "message": {**parsed, "attachments": event_attachments(list(parsed.get("attachments") or []))},
    }


def envelope(message: dict) -> dict:
    return {"mail_from": message["mail_from"], "rcpt_to": message["recipient"],
            "client_ip": message["client_ip"], "helo": message["helo"]}


def event_id(message_id: str) -> str:
    """Deterministic: a redelivered job records and delivers its event once."""
    return f"inbound:{message_id}"
