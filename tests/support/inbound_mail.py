"""Mail to workspaces' inbound addresses (issue 36): messages to send, routes to make,
and — for tests of the API alone — a message received the way the port and the
`inbound` actor receive it (the same two workflow calls, run on the test's store)."""

from __future__ import annotations

from email.message import EmailMessage

from pipelines.adapters.dns_client import DnsPythonResolver
from pipelines.workflows import receive_inbound


def make_route(tenant, url: str, pattern: str = "*", **fields) -> dict:
    response = tenant.post("/inbound/routes", json={"pattern": pattern, "url": url, **fields})
    assert response.status_code == 201, response.text
    return response.json()["data"]


def address_of(tenant, tag: str = "") -> str:
    address = tenant.get("/inbound/address").json()["data"]["address"]
    local, _, domain = address.partition("@")
    return f"{local}+{tag}@{domain}" if tag else address


def mail(*, sender: str = "Ann Smith <ann@sender.example>", to: str, subject: str = "Re: your ticket",
         text: str = "Thanks, that worked.\n", attachment: tuple[str, str, bytes] | None = None,
         headers: dict | None = None) -> bytes:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, to, subject
    message["Message-ID"] = "<reply-1@sender.example>"
    for name, value in (headers or {}).items():
        message[name] = value
    message.set_content(text)
    if attachment is not None:
        filename, content_type, data = attachment
        maintype, _, subtype = content_type.partition("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)
    return message.as_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def received(service, tenant, raw: bytes, recipient: str, *, mail_from: str = "ann@sender.example") -> str:
    """The message as the port stores it (client 192.0.2.10, HELO mx.sender.example) and
    the actor processes it (no broker: the route's lane waits for a scheduler); its id."""
    async def receive(db):
        [message_id] = await receive_inbound.accept(db, raw=raw, mail_from=mail_from, client_ip="192.0.2.10",
                                                    helo="mx.sender.example",
                                                    recipients=[(recipient, tenant.workspace_id)])
        await receive_inbound.process(db, None, DnsPythonResolver(service.env["POSTROOM_DNS_RESOLVER"]), message_id)
        return message_id
    return service.store.call(receive(service.store.db))
