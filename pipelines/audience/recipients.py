"""Who a message is for and is still owed to: its recipients by header (`to`, `cc`, and
`bcc`, which no header shows), the envelope they make together, the recipients an
attempt has not settled, and what taking suppressed addresses out of a message changes.
One definition for the API (when a message is accepted) and the render step (when it is
finally sent)."""

from __future__ import annotations

MAX_RECIPIENTS = 50          # to + cc + bcc of one message
HEADER_FIELDS = ("to", "cc", "bcc")


def as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def recipient_lists(to, cc=None, bcc=None) -> dict[str, list[str]]:
    """`to`, `cc` and `bcc` as lists, each address once: a repeat within a list, or an
    address already in an earlier list (to, then cc, then bcc; compared without regard to
    case), is dropped. Raises ValueError naming the field that takes the count past
    `MAX_RECIPIENTS` (counted as given)."""
    given = {"to": as_list(to), "cc": as_list(cc), "bcc": as_list(bcc)}
    total = 0
    for field in HEADER_FIELDS:
        total += len(given[field])
        if total > MAX_RECIPIENTS:
            raise ValueError(field)
    seen: set[str] = set()
    out: dict[str, list[str]] = {}
    for field in HEADER_FIELDS:
        out[field] = []
        for address in given[field]:
            if address.lower() not in seen:
                seen.add(address.lower())
                out[field].append(address)
    return out


def envelope(message: dict) -> list[str]:
    """Every recipient of the message, as SMTP's RCPT TO names them: to, cc, then bcc."""
    return [*message["to"], *message.get("cc", ()), *message.get("bcc", ())]


def owed_recipients(message: dict) -> list[str]:
    """The envelope recipients still to try: those an earlier attempt settled (accepted, or
    refused for good) or that were suppressed are never sent to."""
    settled = {*message.get("accepted_recipients", []), *message.get("refused_recipients", []),
               *message.get("suppressed_recipients", [])}
    return [r for r in envelope(message) if r not in settled]


def without_suppressed(message: dict, suppressed: set[str]) -> tuple[dict, bool] | None:
    """The changes that take the suppressed addresses among the recipients still owed out
    of `message`, and whether nobody is left who has or will get it; None when none of them
    is suppressed. They are listed in `suppressed_recipients`; while nobody has the message
    yet they also leave `to`, `cc` and `bcc` (so To and Cc do not show them) — unless
    nobody at all is left (then the lists stay as asked and the caller makes the message
    `suppressed`)."""
    owed = owed_recipients(message)
    gone = [r for r in owed if r in suppressed]
    if not gone:
        return None
    changes: dict = {"suppressed_recipients": [*message.get("suppressed_recipients", []), *gone]}
    nobody_left = len(gone) == len(owed) and not message.get("accepted_recipients")
    if not nobody_left and not (message.get("accepted_recipients") or message.get("refused_recipients")):
        for field in HEADER_FIELDS:
            if field in message:
                changes[field] = [r for r in message[field] if r not in gone]
    return changes, nobody_left


def first_recipient(message: dict) -> str:
    """Whom a message to several addresses is personalised for: the first `to`, or the
    first of the envelope when every `to` was suppressed."""
    return (message["to"] or envelope(message))[0]
