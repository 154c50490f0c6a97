"""Which recipients of our message a report may bounce: only those it was sent to.

A report comes back to the VERP address of one message (or quotes its Message-ID), and
whatever addresses it names are believed only where they are recipients of that message:
a DSN naming `victim@unrelated.example` bounces nobody. Each bounce is matched on the
address the report names for the recipient (Final-Recipient), else on the one it was
originally sent to (Original-Recipient: forwarding and aliases rewrite the first), and
takes the recipient's address as we stored it. Letter case does not matter, nor does a
domain written as A-labels (`xn--bcher-kva.example`) or U-labels (`bücher.example`).

A complaint is about the message it quotes: when the feedback loop redacted the
complainant, or names an address the message was forwarded to, it is the complaint of
the message's recipient if the message had exactly one."""

from __future__ import annotations

import dataclasses

from pipelines.audience.recipients import envelope
from pipelines.bounces.parsing.isp import with_isp
from pipelines.bounces.parsing.model import Bounce


@dataclasses.dataclass(frozen=True)
class Matched:
    bounces: list[Bounce]   # one per recipient of the message, addressed as stored
    ignored: list[str]      # addresses the report named that the message was not sent to


def address_key(address: str) -> str:
    local, _, domain = address.strip().strip("<>").rpartition("@")
    domain = domain.strip().rstrip(".").lower()
    try:
        domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        pass
    return f"{local.casefold()}@{domain}"


def sent_to(message: dict) -> list[str]:
    """The recipients the message went (or was meant) to: its `to`, `cc` and `bcc`, less those suppressed
    before it left."""
    suppressed = set(message.get("suppressed_recipients", []))
    return [r for r in envelope(message) if r not in suppressed]


def match(bounces: list[Bounce], recipients: list[str]) -> Matched:
    by_key = {address_key(r): r for r in recipients}
    matched: dict[str, Bounce] = {}
    ignored: list[str] = []
    for bounce in bounces:
        named = [a for a in (bounce.email, bounce.original_recipient) if a]
        recipient = next((by_key[address_key(a)] for a in named if address_key(a) in by_key), None)
        if recipient is None and bounce.kind == "complaint" and len(recipients) == 1:
            recipient = recipients[0]
        if recipient is None:
            ignored.extend(a for a in named or ["(no address)"] if a not in ignored)
            continue
        # a report may repeat a recipient (one block per attempt): the first block speaks for it
        matched.setdefault(recipient, with_isp(bounce.replace(email=recipient)))
    return Matched(list(matched.values()), ignored)
