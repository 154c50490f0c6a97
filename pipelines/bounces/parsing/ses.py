"""Amazon SES event notifications mailed by SNS (an email subscription to the topic): the
body is JSON — the SNS envelope with the SES event as a JSON string in `Message`, or the
SES event itself. A `Bounce` event names each failed recipient with its status and the
remote server's words (read like any DSN field); a `Delivery` event is no failure and is
left to the caller as "not a report" (it bounces nobody)."""

from __future__ import annotations

import json
from email.message import EmailMessage

from pipelines.bounces.parsing.classify import classify, clean_diagnostic, status_from
from pipelines.bounces.parsing.model import Bounce
from pipelines.bounces.parsing.text_reports import first_text


def _event(msg: EmailMessage) -> dict | None:
    text = first_text(msg).strip()
    if not text.startswith("{"):
        return None
    try:
        # the first JSON document of the body (SNS appends an unsubscribe footer after it);
        # not strict: mail transport may have folded a long line inside a string
        decoder = json.JSONDecoder(strict=False)
        body, _ = decoder.raw_decode(text)
        if isinstance(body, dict) and isinstance(body.get("Message"), str):
            body, _ = decoder.raw_decode(body["Message"])
    except ValueError:
        return None
    return body if isinstance(body, dict) and "notificationType" in body else None


def parse(msg: EmailMessage) -> tuple[str, list[Bounce]] | None:
    event = _event(msg)
    if not event or event.get("notificationType") != "Bounce":
        return None
    bounce = event.get("bounce") or {}
    # "Transient" bounce types are the ones SES itself will not retry either, but say a
    # temporary condition: read as a delayed failure
    action = "delayed" if bounce.get("bounceType") == "Transient" else "failed"
    reporting = str(bounce.get("reportingMTA") or "").split(";", 1)[-1].strip()
    bounces = []
    for recipient in bounce.get("bouncedRecipients") or []:
        address = str(recipient.get("emailAddress") or "").strip().lower()
        if "@" not in address:
            continue
        diagnostic = clean_diagnostic(str(recipient.get("diagnosticCode") or ""))
        status = status_from(str(recipient.get("status") or ""), diagnostic)
        verdict = classify(status, diagnostic, action)
        bounces.append(Bounce(email=address, type=verdict.type, category=verdict.category, reason=verdict.reason,
                              source="dsn", smtp_status=status, diagnostic_code=diagnostic, action=action,
                              reporting_mta=reporting, isp_name="amazonses"))
    return ("amazonses", bounces) if bounces else None
