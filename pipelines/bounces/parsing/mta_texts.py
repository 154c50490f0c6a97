"""Text-only notices as mail servers write them — qmail, Exim, Postfix before DSNs,
sendmail, SMTP32, GroupWise, old Exchange, Yahoo, AOL, Netscape, Sina, LLNL, Yale and the
many "simple" ones — and warnings (delayed delivery) in those styles.

Which addresses failed comes from `flufl.bounce` (GNU Mailman's maintained detectors, run
in its own order, most specific first; the first that finds an address names the format).
Its detectors say which failures are temporary (warnings); the classification on top is
ours: the reply the notice gives for each address (text_reports.reply_for) goes through
classify.py like any other status. A notice that says nothing more than "failed" is
`undetermined`, unless it calls the failure permanent."""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage
from email.utils import parseaddr

from flufl.bounce._scan import _DETECTORS  # the detector list, in flufl's own order

from pipelines.bounces.parsing import notices
from pipelines.bounces.parsing.classify import classify, clean_diagnostic, status_from
from pipelines.bounces.parsing.isp import provider_of
from pipelines.bounces.parsing.model import Bounce
from pipelines.bounces.parsing.text_reports import ADDRESS, notice_text, reply_for, sender_of


def _addresses(found) -> list[str]:
    # a detector reading what it was not written for (JSON, a list of headers) can hand back
    # any string with an @ in it: only what is an address is one
    decoded = {a.decode("utf-8", errors="replace").strip().strip("<>") for a in found if a}
    return sorted(a for a in decoded if ADDRESS.fullmatch(a))


def detect(raw: bytes) -> tuple[str, list[str], list[str]] | None:
    """(format, temporary failures, permanent failures) from the first detector that
    finds any, as flufl.bounce's own scan does; None when none does."""
    compat32_message = email.message_from_bytes(raw, policy=email.policy.compat32)  # what the detectors expect
    for detector in _DETECTORS:
        try:
            temporary, permanent = detector().process(compat32_message)
        except (IndexError, KeyError, ValueError, TypeError, AttributeError, LookupError):
            # heuristics meeting a message they were not written for (Yale's on one without a
            # From): not that format; the other detectors still look
            continue
        if temporary or permanent:
            return detector.__name__.lower(), _addresses(temporary), _addresses(permanent)
    return None


def parse_raw(raw: bytes, msg: EmailMessage) -> tuple[str, list[Bounce]] | None:
    found = detect(raw)
    if found is None:
        return None
    style, temporary, permanent = found
    notice = notice_text(msg)
    isp = provider_of(parseaddr(sender_of(msg))[1].rpartition("@")[2]) or ""  # the notice's sender's provider
    # flufl's looser detectors also pick up the notice's own sender and Message-IDs (Zoho):
    # an address is a failure only if the notice's own words name it and it is not the notice's
    own, words = notices.own_addresses(msg), notice.lower()
    temporary, permanent = ([a for a in found if a.lower() not in own and a.lower() in words] or found
                            for found in (temporary, permanent))
    everyone = temporary + permanent
    bounces = []
    for address, action in [(a, "delayed") for a in temporary] + [(a, "failed") for a in permanent]:
        if "@" not in address:
            continue
        local, _, domain = address.rpartition("@")
        reply = clean_diagnostic(reply_for(address, notice, [o for o in everyone if o != address]))
        status = status_from("", reply)
        verdict = classify(status, reply, action, notice=notice)
        bounces.append(Bounce(email=f"{local}@{domain.lower()}", type=verdict.type, category=verdict.category,
                              reason=verdict.reason,
                              source="dsn", smtp_status=status, diagnostic_code=reply, action=action,
                              isp_name=isp))
    return (style, bounces) if bounces else None
