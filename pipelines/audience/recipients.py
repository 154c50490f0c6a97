"""Who a message is still for: the recipients an attempt has not settled, and what taking
suppressed addresses out of a message changes. One definition for the API (when a message
is accepted) and the render step (when it is finally sent)."""

from __future__ import annotations


def owed_recipients(message: dict) -> list[str]:
    """The envelope recipients still to try: those an earlier attempt settled (accepted, or
    refused for good) or that were suppressed are never sent to."""
    settled = {*message.get("accepted_recipients", []), *message.get("refused_recipients", []),
               *message.get("suppressed_recipients", [])}
    return [r for r in message["to"] if r not in settled]


def without_suppressed(message: dict, suppressed: set[str]) -> tuple[dict, bool] | None:
    """The changes that take the suppressed addresses among the recipients still owed out
    of `message`, and whether nobody is left who has or will get it; None when none of them
    is suppressed. They are listed in `suppressed_recipients`; while nobody has the message
    yet they also leave `To` — unless nobody at all is left (then `to` stays as asked and
    the caller makes the message `suppressed`)."""
    owed = owed_recipients(message)
    gone = [r for r in owed if r in suppressed]
    if not gone:
        return None
    changes: dict = {"suppressed_recipients": [*message.get("suppressed_recipients", []), *gone]}
    nobody_left = len(gone) == len(owed) and not message.get("accepted_recipients")
    if not nobody_left and not (message.get("accepted_recipients") or message.get("refused_recipients")):
        changes["to"] = [r for r in message["to"] if r not in gone]
    return changes, nobody_left
