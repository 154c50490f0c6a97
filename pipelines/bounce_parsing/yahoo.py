"""Yahoo-style (qmail) "Failure Notice" texts, no machine-readable part:

    Sorry, we were unable to deliver your message to the following address.

    <bob@yahoo.com>:
    554: delivery error: dd This user doesn't have a yahoo.com account (bob@yahoo.com) [0] - mta1013.mail.gq1.yahoo.com
"""

from __future__ import annotations

import re
from email.message import EmailMessage

from .classify import classify, clean_diagnostic, status_from
from .model import Bounce
from .text_reports import first_text, sender_of

_INTRO = re.compile(r"(unable to deliver your message to the following address|"
                    r"could not be delivered to one or more recipients)", re.I)
_BLOCK = re.compile(r"^<([^<>\s]+@[^<>\s]+)>:\s*\n(.+?)(?=\n\s*\n|\n<[^<>\s]+@|\Z)", re.M | re.S)
_MTA = re.compile(r"\b(mta[\w.-]+\.yahoo\.com)\b", re.I)


def parse(msg: EmailMessage) -> tuple[str, list[Bounce]] | None:
    text = first_text(msg)
    if not _INTRO.search(text):
        return None
    from_yahoo = "yahoo" in sender_of(msg) or "yahoo" in text.lower()
    bounces = []
    for address, reply in _BLOCK.findall(text):
        diagnostic = clean_diagnostic(reply.replace(": ", " ", 1) if re.match(r"[45]\d\d:", reply) else reply)
        status = status_from("", diagnostic)
        mta = _MTA.search(reply)
        bounces.append(Bounce(email=address.split("@")[0] + "@" + address.split("@")[1].lower(),
                              type=classify(status, diagnostic), source="dsn", smtp_status=status,
                              diagnostic_code=diagnostic, action="failed",
                              reporting_mta=mta.group(1) if mta else "",
                              isp_name="yahoo" if from_yahoo else ""))
    return ("yahoo", bounces) if bounces else None
