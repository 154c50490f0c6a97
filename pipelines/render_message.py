"""One stored message → the MIME bytes and envelope the `send` actor hands to SMTP.

Plain code: the actor gathers the documents it needs and passes them in."""

from __future__ import annotations

import dataclasses

from .dkim import Signer, signer_key
from .mime import compose, verp_return_path
from .settings import Settings


@dataclasses.dataclass
class RenderContext:
    settings: Settings
    workspaces: dict[str, dict]
    # pipelines.dkim.signer_key(message) → Signer; a message without one leaves unsigned
    signers: dict[str, Signer] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class RenderResult:
    rendered: list[dict] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def ready_ids(self) -> list[str]:
        return [r["_id"] for r in self.rendered]


def render_one(message: dict, ctx: RenderContext) -> dict:
    s = ctx.settings
    data = compose(
        message_id=message["_id"], from_address=message["from_address"],
        from_name=message.get("from_name"), to=message["to"], subject=message["subject"],
        html=message.get("html"), text=message.get("text"), reply_to=message.get("reply_to"),
        id_domain=message.get("signing_domain") or s.shared_domain)
    signer = ctx.signers.get(signer_key(message))
    if signer is not None:
        data = signer.sign(data)
    return {
        "_id": message["_id"],
        "mail_from": verp_return_path(message["_id"], s.bounce_domain),
        "recipients": list(message["to"]),
        "data": data.decode("ascii"),
    }


def render_all(messages: list[dict], ctx: RenderContext) -> RenderResult:
    result = RenderResult()
    for message in messages:
        try:
            result.rendered.append(render_one(message, ctx))
        except ValueError as error:  # a message that cannot be rendered fails alone
            result.failed[message["_id"]] = str(error)
    return result
