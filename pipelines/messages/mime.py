"""MIME composition: headers and bodies into the bytes handed to SMTP.

Building an `EmailMessage` and serialising it costs about 3 ms a message; a send is
otherwise well under 1 ms. So the parts every message with the same sender and headers shares —
From, Reply-To, fixed headers, the multipart skeleton — are formatted once into a byte
template, cached, and filled per recipient with what differs: To, Subject (personalised
subjects differ per recipient), Message-ID, Date and the bodies (unencoded `7bit` when
they allow it, else quoted-printable, encoded by `binascii`, in C).

Header fields holding caller text (Subject, the From display name) are written by
`pipelines.messages.header_encoding`, never by the stdlib, which would decode encoded words found
in the text into header lines of their own. Recipient addresses are written in their wire
form (`_to_header`: A-label domains, never encoded words).
"""

from __future__ import annotations

import binascii
import dataclasses
import datetime as dt
import functools
import secrets
from collections.abc import Sequence
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime

from pipelines.audience.addresses import wire_form
from pipelines.core.clock import utcnow
from pipelines.messages import custom_headers, mime_parts
from pipelines.messages.header_encoding import mailbox, unstructured
from pipelines.templates.text import html_to_text

_CRLF = b"\r\n"
_TEMPLATE_CACHE_SIZE = 256


def format_address(address: str) -> str:
    local, _, domain = address.rpartition("@")
    return str(Address(username=local, domain=domain))


def _header_lines(pairs: list[tuple[str, str]]) -> bytes:
    """Headers as the SMTP policy writes them (encoded words, folding, CRLF). For
    addresses only: never give it caller text (see the module docstring)."""
    msg = EmailMessage(policy=SMTP)
    for name, value in pairs:
        msg[name] = value
    return msg.as_bytes().split(b"\r\n\r\n", 1)[0] + _CRLF


@dataclasses.dataclass(frozen=True)
class MimeTemplate:
    """The shared part of every message with the same sender, subject and headers."""
    shared_headers: bytes   # From, Reply-To, extra headers, MIME-Version
    boundary: bytes

    def fill(self, *, message_id: str, id_domain: str, to: list[str], subject: str, date: str,
             plain: str, html: str | None, recipient_headers: bytes = b"", cc: Sequence[str] = (),
             files: Sequence[tuple[dict, bytes]] = ()) -> bytes:
        """`cc`: the Cc header's addresses; `files`: (reference, bytes) of each attachment
        (pipelines/messages/mime_parts.py lays them out)."""
        out = [b"Message-ID: <", message_id.encode("ascii"), b"@", id_domain.encode("idna"), b">\r\n",
               b"Date: ", date.encode("ascii"), _CRLF, _to_header(tuple(to)),
               _to_header(tuple(cc), b"Cc") if cc else b"", unstructured("Subject", subject),
               recipient_headers, self.shared_headers]
        if files:
            stem = self.boundary[:-2]  # every boundary of the message starts so: no 7bit body may hold it
            text_part = b'Content-Type: text/plain; charset="utf-8"\r\n' + b"".join(_encoded_body(plain, stem))
            html_part = (b'Content-Type: text/html; charset="utf-8"\r\n' + b"".join(_encoded_body(html, stem))
                         if html is not None else None)
            out.append(mime_parts.body_with_files(text_part, html_part, files, self.boundary))
            return b"".join(out)
        if html is None:
            out += [b'Content-Type: text/plain; charset="utf-8"\r\n', *_encoded_body(plain)]
            return b"".join(out)
        b = self.boundary
        out += [b'Content-Type: multipart/alternative; boundary="', b, b'"\r\n\r\n',
                b"--", b, _CRLF, b'Content-Type: text/plain; charset="utf-8"\r\n', *_encoded_body(plain, b), _CRLF,
                b"--", b, _CRLF, b'Content-Type: text/html; charset="utf-8"\r\n', *_encoded_body(html, b), _CRLF,
                b"--", b, b"--\r\n"]
        return b"".join(out)


@functools.lru_cache(maxsize=_TEMPLATE_CACHE_SIZE)
def mime_template(from_address: str, from_name: str | None, reply_to: str | tuple[str, ...] | None,
                  extra_headers: tuple[tuple[str, str], ...] = ()) -> MimeTemplate:
    """`reply_to`: one address or several."""
    lines = [_address_header("From", from_address, from_name)]
    if isinstance(reply_to, str):
        lines.append(_address_header("Reply-To", reply_to))
    elif reply_to:
        lines.append(_reply_to_header(reply_to))
    lines.append(_own_header_lines(dict(extra_headers)))
    lines.append(b"MIME-Version: 1.0\r\n")
    # "=" never appears bare in quoted-printable, so this boundary cannot occur in a body.
    boundary = f"==_{secrets.token_hex(10)}==".encode("ascii")
    return MimeTemplate(b"".join(lines), boundary)


def _address_header(name: str, address: str, display_name: str | None = None) -> bytes:
    if not address.isascii():  # a non-ASCII address: the stdlib's form, the name ours
        address = _header_lines([(name, format_address(address))]).decode("ascii")
        address = address.split(":", 1)[1].strip()
    return f"{name}: {mailbox(address, display_name)}\r\n".encode("ascii")


def _reply_to_header(addresses: tuple[str, ...]) -> bytes:
    """Reply-To naming several addresses, one a line after the first."""
    written = [_address_header("Reply-To", a).decode("utf-8").split(":", 1)[1].strip() for a in addresses]
    return ("Reply-To: " + ",\r\n ".join(written) + "\r\n").encode("ascii")


def _to_header(to: tuple[str, ...], name: bytes = b"To") -> bytes:
    """The addresses as they go on the wire (pipelines.audience.addresses.wire_form: domains in
    A-labels), never as encoded words, which are not allowed inside an address. A
    non-ASCII local part is written as UTF-8 (RFC 6532): such a message goes out only
    over SMTPUTF8 (the transport checks). Long lists fold after a comma. `name`: To or
    Cc. A To left with nobody (every `to` suppressed, a cc still owed) is the empty group
    `undisclosed-recipients:;` (RFC 5322 §3.4)."""
    if not to:
        return name + b": undisclosed-recipients:;\r\n"
    addresses = []
    for address in to:
        if "\r" in address or "\n" in address:
            raise ValueError("a recipient address contains a line break")
        try:
            addresses.append(wire_form(address))
        except ValueError:  # not writable in A-labels: the transport refuses it on its own
            addresses.append(address)
    value = ", ".join(addresses)
    if len(value) >= 900:
        value = ",\r\n ".join(addresses)
    return name + b": " + value.encode("utf-8") + _CRLF


_MAX_LINE_OCTETS = 998  # SMTP's limit on a line, CRLF not counted (RFC 5321 §4.5.3.1.6)


def _encoded_body(text: str, boundary: bytes = b"") -> tuple[bytes, bytes]:
    """The Content-Transfer-Encoding header (and the blank line) and the body, CRLF line
    ends. Unencoded `7bit` when the text is ASCII, without NUL, every line within SMTP's
    998 octets: the usual HTML and text, sent with no encoding pass, and a fifth smaller
    than quoted-printable, which writes each `=` of HTML as `=3D`. Quoted-printable
    otherwise (any non-ASCII character: 8bit would need the next hop's 8BITMIME, which
    is not known when the message is made, or a text that holds the multipart boundary,
    which quoted-printable cannot: it never writes a bare `=`)."""
    lf = text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
    if lf.isascii() and "\x00" not in lf and max(map(len, lf.split("\n"))) <= _MAX_LINE_OCTETS:
        body = lf.replace("\n", "\r\n").encode("ascii")
        if not (boundary and boundary in body):
            ended = body if body.endswith(_CRLF) or not body else body + _CRLF
            return b"Content-Transfer-Encoding: 7bit\r\n\r\n", ended
    return b"Content-Transfer-Encoding: quoted-printable\r\n\r\n", _qp(lf)


def _qp(text: str) -> bytes:
    """Quoted-printable with CRLF line ends (RFC 2045), every line ≤ 76 characters."""
    if "\r" in text:   # LF line ends for b2a_qp; a scan costs less than two replaces
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    encoded = binascii.b2a_qp(text.encode("utf-8"), quotetabs=False, istext=True, header=False)
    body = encoded.replace(b"\n", _CRLF)
    return body if body.endswith(_CRLF) else body + _CRLF


def compose(*, message_id: str, from_address: str, from_name: str | None, to: list[str],
            subject: str, html: str | None, text: str | None, reply_to: str | list[str] | None,
            id_domain: str, extra_headers: dict[str, str] | None = None,
            recipient_headers: dict[str, str] | None = None, date: dt.datetime | None = None,
            cc: Sequence[str] = (), caller_headers: Sequence[Sequence[str]] = (),
            files: Sequence[tuple[dict, bytes]] = ()) -> bytes:
    """`extra_headers` are shared by many messages (cached in the template);
    `recipient_headers` differ per recipient (e.g. List-Unsubscribe) and are not cached.
    `date`: the Date header (default now); a message made again for a retry keeps its first.
    `cc`: the Cc header (bcc recipients are in no header: the envelope alone names them);
    `caller_headers`: the sender's own (name, value) headers (pipelines/messages/custom_headers.py);
    `files`: the attachments, (reference, bytes)."""
    reply = tuple(reply_to) if isinstance(reply_to, list) else reply_to
    template = mime_template(from_address, from_name, reply, tuple((extra_headers or {}).items()))
    plain = text if text is not None else (html_to_text(html) if html else "")
    own = _own_header_lines(recipient_headers or {})
    return template.fill(message_id=message_id, id_domain=id_domain, to=to, subject=subject,
                         date=format_datetime(date or utcnow()), plain=plain, html=html,
                         recipient_headers=(own + custom_headers.header_lines(caller_headers)) if caller_headers
                         else own, cc=cc, files=files)


def _own_header_lines(headers: dict[str, str]) -> bytes:
    """Headers we make (List-Unsubscribe, List-Id, Feedback-ID): printable ASCII values are
    written directly (a list of `<URI>`s folded after each comma); anything else is
    encoded like free text."""
    out = []
    for name, value in headers.items():
        if value.isascii() and value.isprintable() and len(value) < 900:
            folded = value.replace(", <", ",\r\n <")
            out.append(f"{name}: {folded}\r\n".encode("ascii"))
        else:
            out.append(unstructured(name, value))
    return b"".join(out)


def verp_return_path(message_id: str, bounce_domain: str) -> str:
    """Bounces come back to an address that names the message (VERP)."""
    return f"bounce+{message_id}@{bounce_domain}"


def message_id_from_verp(address: str) -> str | None:
    local = address.split("@", 1)[0]
    if local.startswith("bounce+") and len(local) > 7:
        return local[7:]
    return None
