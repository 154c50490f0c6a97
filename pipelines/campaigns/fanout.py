"""Planning a campaign's fan-out: its states, its fan-out batches, and the message document
each recipient gets.

States (the spec shows only `draft`):

    draft ──schedule──▶ scheduled ──(send_at due)──┐
      │                    │                       ▼
      └──────send/api──────┴──────────────────▶ sending ──every message final──▶ sent
                           │                    │     ▲
                           │                  pause  resume
                           │                    ▼     │
                           │                     paused
                           │                       │
                           └──────cancel───────────┴──▶ cancelled   (from sending too)
    scheduled ──audience or template gone at send_at──▶ failed

Pause and resume are not in the spec (issue #37 asks for them: docs/campaigns.md).

A recipient's message `_id` is derived from (campaign, contact), so a part that runs
twice (a redelivered broker message, a worker restarted after a crash) inserts nothing
new: the store refuses the duplicate `_id`."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

from pipelines.templates.personalise import stored_template_data

# Recipients one `campaigns` job hands on (a fan-out batch; the API counts them in
# `batches_queued`).
BATCH_SIZE = 500
# Recipients a campaign part carries (mongo/campaign_parts.py): one render job, one
# claim, one insert of their messages; a fan-out batch is cut into several so workers share it.
PART_SIZE = 100

STATUSES = ("draft", "scheduled", "sending", "paused", "sent", "cancelled", "failed")
STARTABLE = ("draft", "scheduled")          # send/api and the scheduler start these
SCHEDULABLE = ("draft", "scheduled")        # scheduling again moves send_at
CANCELLABLE = ("scheduled", "sending", "paused")
PAUSABLE = ("sending",)
RESUMABLE = ("paused",)


def message_id(campaign_id: str, contact_id: str) -> str:
    digest = hashlib.sha256(f"{campaign_id}\x00{contact_id}".encode()).hexdigest()[:32]
    return f"msg_{digest}"


def batch_count(recipients: int, batch_size: int = BATCH_SIZE) -> int:
    return math.ceil(recipients / batch_size) if recipients > 0 else 0


def campaign_message(campaign: Mapping[str, Any], contact: dict, now: str) -> dict:
    """The message document for one recipient (rendered later, one render per contact).
    `campaign`: a Campaign, or an automation's email step shaped like one (automations/runs.py)."""
    sender = campaign["sender"]
    return {
        "_id": message_id(campaign["_id"], contact["_id"]),
        "workspace_id": campaign["workspace_id"],
        "key_id": campaign["key_id"],
        "sandbox": bool(campaign.get("sandbox")),
        "kind": "campaign",
        "to": [contact["email"]],
        "subject": campaign["subject"],
        "html": None,
        "text": None,
        "template_id": campaign["template_id"],
        "template_version": campaign["template_version"],
        **stored_template_data(None),
        "from_address": sender["from_address"],
        "from_name": sender["from_name"],
        "reply_to": sender["reply_to"],
        "signing_domain": sender["signing_domain"],
        "custom_domain": sender["custom_domain"],
        "track_opens": bool(campaign["track_opens"]),
        "track_clicks": bool(campaign["track_clicks"]),
        "status": "queued",
        "queued_at": now,
        "attempts": 0,
        "batch_id": None,
        "campaign_id": campaign["_id"],
        "contact_id": contact["_id"],
        "created_at": now,
        "updated_at": now,
        "history": [{"status": "queued", "at": now}],
    }
