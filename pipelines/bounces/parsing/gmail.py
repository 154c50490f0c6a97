"""Gmail's older text-only notices (Gmail's current ones are RFC 3464 reports):

    Delivery to the following recipient failed permanently:

         bob@example.com

    Technical details of permanent failure:
    Google tried to deliver your message, but it was rejected by the server for the
    recipient domain example.com by mx.example.com. [203.0.113.5].

    The error that the other server returned was:
    550 5.1.1 <bob@example.com>: Recipient address rejected: User unknown
"""

from __future__ import annotations

import re
from email.message import EmailMessage

from pipelines.bounces.parsing import classify, reasons
from pipelines.bounces.parsing.model import TRANSIENT, Bounce
from pipelines.bounces.parsing.text_reports import ADDRESS, first_text, isp_bounces

_HEAD = re.compile(r"Delivery to the following recipients? (failed permanently|has been delayed|"
                   r"failed temporarily):\s*(.+?)\n\s*\n", re.I | re.S)
_RETURNED = re.compile(r"(?:The error that the other server returned was|"
                       r"The response from the remote server was):\s*\n(.+?)(?:\n\s*\n|\Z)", re.I | re.S)
_BY_SERVER = re.compile(r"by ([\w.-]+\.[a-z]{2,})\.? \[", re.I)
# without a remote reply (a timeout, a TLS or DNS failure) Gmail's own technical words say why
_TECHNICAL = re.compile(r"Technical details of (?:permanent|temporary) failure:\s*\n(.+?)(?:\n\s*\n|\Z)", re.I | re.S)
# Gmail's "(state N)" says at which step the remote server refused: 15 to 18 are the refusals
# of a recipient it had accepted or of the message's data (after RCPT, at DATA), which Sisimai's
# Gmail reading calls filtered whatever vague words ("Header error") the server gave
_FILTERED_STATE = re.compile(r"\(state 1[5-8]\)", re.I)


def parse(msg: EmailMessage) -> tuple[str, list[Bounce]] | None:
    text = first_text(msg)
    if not (head := _HEAD.search(text)):
        return None
    action = "failed" if "permanently" in head.group(1).lower() else "delayed"
    reply = _RETURNED.search(text) or _TECHNICAL.search(text)
    found = isp_bounces("gmail", text, ADDRESS.findall(head.group(2)), reply, action=action,
                        server=_BY_SERVER, default_mta="", notice=head.group(0))
    if found and _FILTERED_STATE.search(" ".join(text.split())):
        found = found[0], [b if reasons.reason_from_code(b.smtp_status)[1] else
                           b.replace(type=TRANSIENT, reason=reasons.FILTERED, category=classify.POLICY)
                           for b in found[1]]
    return found
