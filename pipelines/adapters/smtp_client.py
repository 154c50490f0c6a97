"""Where composed messages go: an SMTP server, or (embedded default) a capture folder so
nothing leaves the machine. Both report per-recipient outcomes the same way, and neither
ever raises: whatever goes wrong becomes an `Outcome` for each recipient it touched, so
one message's trouble never reaches the job's other messages.

SMTP, as decided (docs/email.md):
- EHLO names `ehlo_choice`'s name: configurable, else a public DNS name; never `localhost`
  or an address literal.
- `smtps://` is implicit TLS; on `smtp://` STARTTLS is used whenever the server offers
  it. A certificate that does not verify (system CAs plus the configured CA file) fails
  the transaction transiently rather than falling back to plain text — unless
  verification is switched off for a relay with a self-signed certificate.
- Credentials never travel in clear: with a user in the URL and no TLS on the connection
  (a plain server that offers no STARTTLS), nothing is sent and the transaction fails
  transiently with the reason, AUTH never having been written.
- One round trip a message where the next hop allows it: PIPELINING (RFC 2920) sends
  the envelope as one group; with CHUNKING (RFC 3030) as well, the message goes in that
  group as `BDAT <size> LAST`, unstuffed. A refused chunk closes the connection instead
  of reusing it (a server that did not read the chunk would be out of step).
- Addresses go out in their wire form (pipelines.audience.addresses.wire_form: domains as IDNA
  A-labels). A message that still is not ASCII — a recipient with a non-ASCII local part
  (in the envelope and the To: header) — needs SMTPUTF8: it is used when the next hop
  offers it; when it does not, every recipient of that message is refused here, for good
  (`local`: no bounce is recorded, nobody is suppressed), with the reason.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast
from urllib.parse import unquote, urlsplit

import aiosmtplib
import aiosmtplib.smtp
from aiosmtplib.email import quote_address
from aiosmtplib.protocol import (
    COMMAND_INJECTION_REGEX,
    MAX_RESPONSE_LENGTH,
    SMTPProtocol,
    normalize_message_line_endings,
)

from pipelines.audience.addresses import wire_form
from pipelines.core.byte_search import contains
from pipelines.domains.dns_records import is_public_host_name
from pipelines.messages.outcomes import Outcome, unexpected

log = logging.getLogger("postroom.transport")


class _Starts:
    """When a transport may start a transaction: before the caller's `start_by`, and not
    once it drains. A stopping worker drains its transport (actors/heartbeat.py): the
    transactions in flight finish, and every later one is reported not started (None),
    so the job records what went out and hands the rest back for another worker, instead
    of sending while its process goes away (what it sent then could not be recorded)."""

    _draining = False

    def drain(self) -> None:
        self._draining = True

    def _may_start(self, start_by: float | None, halted: Callable[[], bool] | None = None) -> bool:
        """`halted`: the caller's own stop (a campaign part's job whose campaign was
        paused or cancelled: pipelines/workflows/pause_campaign.watch)."""
        return (not self._draining and (start_by is None or time.monotonic() <= start_by)
                and not (halted is not None and halted()))


class CaptureTransport(_Starts):
    """Writes each message as an .eml file under `folder` (the local capture outbox)."""

    def __init__(self, folder: Path):
        self.folder = folder

    async def send(self, mail_from: str, recipients: list[str], data: bytes, name: str,
                   start_by: float | None = None, crlf_only: bool = False,
                   halted: Callable[[], bool] | None = None) -> dict[str, Outcome] | None:
        if not self._may_start(start_by, halted):
            return None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{name}.eml"
            tmp = path.with_suffix(".tmp")
            header = f"X-Envelope-From: {mail_from}\r\nX-Envelope-To: {', '.join(recipients)}\r\n".encode()
            await asyncio.to_thread(_write, tmp, header + data)
            os.replace(tmp, path)
        except OSError as error:
            return {r: Outcome(0, f"capture failed: {error}", local=True) for r in recipients}
        return {r: Outcome(250, "captured") for r in recipients}

    async def close(self) -> None:
        return None


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


class CleartextLoginRefused(Exception):
    """Credentials are configured but the connection is not encrypted."""


def ehlo_choice(configured: str | None, base_url: str, bounce_domain: str,
                fqdn: str | None = None) -> tuple[str, str]:
    """The EHLO name and where it came from (`setting`, `base_url`, `fqdn`, `bounce_domain`):
    the configured name; else the host of BASE_URL when it is a DNS name (the public name
    of this service); else the machine's fully qualified name when it is a public one; else
    the bounce domain — the operator publishes the sending IPs' SPF record there, so a
    receiver checking SPF on the EHLO name (RFC 7208 §2.3) finds them allowed."""
    if configured:
        return configured, "setting"
    host = urlsplit(base_url).hostname or ""
    if is_public_host_name(host):
        return host, "base_url"
    fqdn = socket.getfqdn() if fqdn is None else fqdn
    if is_public_host_name(fqdn):
        return fqdn, "fqdn"
    return bounce_domain, "bounce_domain"


def helo_name(configured: str | None, base_url: str, bounce_domain: str, fqdn: str | None = None) -> str:
    return ehlo_choice(configured, base_url, bounce_domain, fqdn)[0]


def announce_ehlo(settings) -> str | None:
    """The EHLO name `settings` give (None: no SMTP server, nothing to greet), with a
    warning (once a process: worker processes call it as they start) when no public name
    was given: the operator should set one whose address has a matching PTR record."""
    if not settings.smtp_url:
        return None
    return _announced_ehlo(settings.smtp_helo_name, settings.base_url, settings.bounce_domain)


@functools.cache
def _announced_ehlo(configured: str | None, base_url: str, bounce_domain: str) -> str:
    name, source = ehlo_choice(configured, base_url, bounce_domain)
    if source in ("fqdn", "bounce_domain"):
        log.warning("EHLO name %s (from the %s): neither POSTROOM_SMTP_HELO_NAME nor a DNS name in "
                    "POSTROOM_BASE_URL (%s) is set; set POSTROOM_SMTP_HELO_NAME to this host's public "
                    "name (its A record and the sending IP's PTR record agreeing)",
                    name, "machine's FQDN" if source == "fqdn" else "bounce domain", base_url)
    return name


def tls_context(verify: bool = True, ca_file: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


# An address that needs no quoting or parsing on an SMTP command line (the usual case).
_PLAIN_ADDRESS = re.compile(r"[^\s<>\"()\[\]\\,;:@]+@[^\s<>\"()\[\]\\,;:@]+")


class _GroupReading(SMTPProtocol):
    """aiosmtplib's protocol, able to read the answers to a group of pipelined commands
    (RFC 2920). Its own reader takes one answer per command awaited and drops what arrives
    while that answer waits to be picked up, so a server answering a group in one packet
    would lose answers; `group` collects every answer of its group itself. Outside a group
    it is aiosmtplib's protocol unchanged."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._wanted = 0
        self._answers: list[aiosmtplib.SMTPResponse] = []
        self._group_done: asyncio.Future | None = None

    async def group(self, commands: list[bytes], *, payload: bytes = b"") -> list[aiosmtplib.SMTPResponse]:
        """Write `commands` at once (and `payload` after them: a BDAT chunk) and return
        their answers, in order. No timeout of its own: the caller bounds the transaction
        (SmtpTransport)."""
        for command in commands:
            if COMMAND_INJECTION_REGEX.search(command):
                raise ValueError("Command arg contains a prohibited control character")
        if self._command_lock is None:
            raise aiosmtplib.SMTPServerDisconnected("Server not connected")
        async with self._command_lock:
            self._wanted, self._answers = len(commands), []
            self._group_done = done = self._loop.create_future()
            try:
                self.write(b"".join([*(c + b"\r\n" for c in commands), payload]))
                return await done
            finally:
                self._group_done = None

    def data_received(self, data: bytes) -> None:
        done = self._group_done
        if done is None:
            return super().data_received(data)
        if done.done():
            return
        self._buffer.extend(data)
        try:
            while len(self._answers) < self._wanted:
                answer = self._read_response_from_buffer()
                if answer is None:
                    if len(self._buffer) > MAX_RESPONSE_LENGTH:
                        raise aiosmtplib.SMTPResponseException(500, "Response too long")
                    return
                self._answers.append(answer)
        except Exception as error:  # a malformed answer ends the group as it ends a command
            done.set_exception(error)
            return
        done.set_result(self._answers)

    def _end_group(self, error: Exception) -> None:
        if self._group_done is not None and not self._group_done.done():
            self._group_done.set_exception(error)

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_group(aiosmtplib.SMTPServerDisconnected("Connection lost"))
        super().connection_lost(exc)

    def eof_received(self) -> bool:
        self._end_group(aiosmtplib.SMTPServerDisconnected("Unexpected EOF received"))
        return super().eof_received()


# aiosmtplib makes its protocol by this module-level name; ours behaves as its own outside
# a group, so every client in the process may share it.
aiosmtplib.smtp.SMTPProtocol = _GroupReading  # type: ignore[misc]  # (replacing a class, on purpose)


class _Client(aiosmtplib.SMTP):
    """aiosmtplib's client with a cheaper mail transaction. Its `sendmail` makes five
    regex passes over the whole message (line ends normalised three times, dot-stuffing)
    and parses every address twice with the stdlib's address parser: 1.0 ms of CPU for a
    35 KB message, several times what the rest of the transaction costs. This `sendmail`
    keeps its behaviour (SIZE on MAIL, one RCPT per recipient, the refused ones returned
    unless all are, RSET after a refusal, the same exceptions) and does the same work with
    bytes scans: a message we composed has CRLF line ends already, so it is only
    checked, and dot-stuffing is one `replace`. One transaction at a time per connection
    (the pool lends each to one sender). Where the server offers PIPELINING (RFC 2920;
    Postfix, Exim and the large mailbox providers do) the envelope is one group of
    commands: a round trip and two socket writes fewer a message, one fewer per extra
    recipient. Where it offers CHUNKING (RFC 3030) too (Postfix 3.4+, Exchange, Gmail),
    the message itself joins that group as one `BDAT … LAST` chunk: one round trip and
    one write a message in all, and nothing to dot-stuff."""

    @property
    def _grouping(self) -> _GroupReading:
        """The connection's protocol: ours, made by the name replaced above (connected: a
        transaction runs on a connection)."""
        return cast(_GroupReading, self.protocol)

    async def send_composed(self, sender: str, recipients: list[str], message: bytes, *, smtputf8: bool,
                            crlf_only: bool = False):
        """(refused recipients → their answer, the DATA or BDAT answer's text), as
        aiosmtplib's `sendmail` returns them (`crlf_only`: see _crlf_lines)."""
        encoding = "utf-8" if smtputf8 else "ascii"
        options = [b"SMTPUTF8"] if smtputf8 else []
        await self._ehlo_or_helo_if_needed()
        if smtputf8 and not self.supports_extension("smtputf8"):
            raise aiosmtplib.SMTPNotSupported("SMTPUTF8 is not supported by this server")
        normal = _crlf_lines(message, crlf_only)
        if self.supports_extension("size"):  # RFC 1870: the message as transmitted, unstuffed
            options.insert(0, b"SIZE=%d" % len(normal))
        if self.supports_extension("pipelining") and self.supports_extension("chunking"):
            return await self._transaction_chunked(sender, recipients, encoding, options, normal)
        payload = _dot_stuffed(normal)
        try:
            if self.supports_extension("pipelining"):
                refused = await self._envelope_pipelined(sender, recipients, encoding, options)
            else:
                refused = await self._envelope_one_by_one(sender, recipients, encoding, options)
            # written and awaited with no pause between: the reply cannot arrive unawaited
            self._grouping.write(payload)
            try:  # no timeout of its own: SmtpTransport bounds the whole transaction
                response = await self._grouping.read_response(timeout=None)
            except (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError):
                self.close()
                raise
            if response.code != aiosmtplib.SMTPStatus.completed:
                raise aiosmtplib.SMTPDataError(response.code, response.message)
        except (aiosmtplib.SMTPResponseException, aiosmtplib.SMTPRecipientsRefused):
            try:  # as aiosmtplib does: the envelope reset for the connection's next message
                await self.rset()
            except (ConnectionError, aiosmtplib.SMTPResponseException):
                pass
            raise
        return {r.recipient: aiosmtplib.SMTPResponse(r.code, r.message) for r in refused}, response.message

    async def _transaction_chunked(self, sender: str, recipients: list[str], encoding: str, options: list[bytes],
                                   normal: bytes):
        """The whole transaction in one write, where the server offers CHUNKING (RFC 3030)
        and PIPELINING: MAIL, the RCPTs and `BDAT <size> LAST` followed by the message as
        it is (no dot-stuffing, no end marker), and their answers read together — one
        round trip a message instead of two, and no scan for lines to stuff. The message
        goes even when the envelope will be refused (it cannot be held back without a
        round trip); the server reads and discards it then. When the chunk is refused
        (the sender, every recipient or the message) the connection is closed rather than
        reused: a server that did not read the chunk would take its lines for commands."""
        commands = [b"MAIL FROM:" + b" ".join([_envelope(sender, encoding), *options]),
                    *(b"RCPT TO:" + _envelope(r, encoding) for r in recipients), b"BDAT %d LAST" % len(normal)]
        answers = await self._grouping.group(commands, payload=normal)
        mail, rcpt_answers, chunk = answers[0], answers[1:-1], answers[-1]
        refused = _refused(recipients, rcpt_answers)
        if chunk.code != aiosmtplib.SMTPStatus.completed:  # refused, whatever became of the chunk
            self.close()
        if mail.code != aiosmtplib.SMTPStatus.completed:
            raise aiosmtplib.SMTPSenderRefused(mail.code, mail.message, sender)
        if len(refused) == len(recipients):
            raise aiosmtplib.SMTPRecipientsRefused(refused)
        if chunk.code != aiosmtplib.SMTPStatus.completed:
            raise aiosmtplib.SMTPDataError(chunk.code, chunk.message)
        return {r.recipient: aiosmtplib.SMTPResponse(r.code, r.message) for r in refused}, chunk.message

    async def _envelope_one_by_one(self, sender: str, recipients: list[str], encoding: str,
                                   options: list[bytes]) -> list[aiosmtplib.SMTPRecipientRefused]:
        """MAIL, each RCPT and DATA, each answer awaited before the next command: the
        refused recipients (raises when the sender, every recipient or DATA is refused)."""
        response = await self.execute_command(b"MAIL", b"FROM:" + _envelope(sender, encoding), *options)
        if response.code != aiosmtplib.SMTPStatus.completed:
            raise aiosmtplib.SMTPSenderRefused(response.code, response.message, sender)
        rcpt_answers = [await self.execute_command(b"RCPT", b"TO:" + _envelope(r, encoding)) for r in recipients]
        refused = _refused(recipients, rcpt_answers)
        if len(refused) == len(recipients):
            raise aiosmtplib.SMTPRecipientsRefused(refused)
        _expect_data(await self.execute_command(b"DATA"))
        return refused

    async def _envelope_pipelined(self, sender: str, recipients: list[str], encoding: str,
                                  options: list[bytes]) -> list[aiosmtplib.SMTPRecipientRefused]:
        """The same envelope as one group of commands (RFC 2920 PIPELINING: MAIL, the RCPTs
        and DATA in one write, their answers read together): one round trip instead of
        two and one per recipient. When DATA was taken although nothing can be delivered
        (the sender or every recipient refused), the empty message is ended with the lone
        dot, as RFC 2920 section 3.1 asks, before the refusal is raised."""
        commands = [b"MAIL FROM:" + b" ".join([_envelope(sender, encoding), *options]),
                    *(b"RCPT TO:" + _envelope(r, encoding) for r in recipients), b"DATA"]
        answers = await self._grouping.group(commands)
        mail, rcpt_answers, data = answers[0], answers[1:-1], answers[-1]
        refused = _refused(recipients, rcpt_answers)
        nothing_to_send = mail.code != aiosmtplib.SMTPStatus.completed or len(refused) == len(recipients)
        if nothing_to_send and data.code == aiosmtplib.SMTPStatus.start_input:
            self._grouping.write(b".\r\n")
            await self._grouping.read_response(timeout=self.timeout)
        if mail.code != aiosmtplib.SMTPStatus.completed:
            raise aiosmtplib.SMTPSenderRefused(mail.code, mail.message, sender)
        if len(refused) == len(recipients):
            raise aiosmtplib.SMTPRecipientsRefused(refused)
        _expect_data(data)
        return refused


def _refused(recipients: list[str], answers: list) -> list[aiosmtplib.SMTPRecipientRefused]:
    return [aiosmtplib.SMTPRecipientRefused(a.code, a.message, r) for r, a in zip(recipients, answers, strict=True)
            if a.code not in (aiosmtplib.SMTPStatus.completed, aiosmtplib.SMTPStatus.will_forward)]


def _expect_data(response) -> None:
    if response.code != aiosmtplib.SMTPStatus.start_input:
        raise aiosmtplib.SMTPDataError(response.code, response.message)


def _crlf_lines(message: bytes, crlf_only: bool = False) -> bytes:
    """The message with every line ended CRLF, the last too. `crlf_only`: the caller knows
    it is already (what pipelines/mime composes), which spares three scans of it."""
    if (crlf_only or message.count(b"\r\n") == message.count(b"\n") == message.count(b"\r")) \
            and message.endswith(b"\r\n"):
        return message
    return normalize_message_line_endings(message)


def _dot_stuffed(normal: bytes) -> bytes:
    """DATA's form of a message with CRLF lines (_crlf_lines): a leading dot doubled on
    every line, and the lone-dot line that ends it."""
    stuffed = normal.replace(b"\r\n.", b"\r\n..") if contains(normal, b"\r\n.") else normal
    if stuffed.startswith(b"."):
        stuffed = b"." + stuffed
    return stuffed + b".\r\n"


def _envelope(address: str, encoding: str) -> bytes:
    """`<address>` for MAIL or RCPT; anything unusual goes through aiosmtplib's own quoting,
    which refuses what could inject a command (ValueError)."""
    if _PLAIN_ADDRESS.fullmatch(address):
        return b"<" + address.encode(encoding) + b">"
    return quote_address(address).encode(encoding)


class SmtpTransport(_Starts):
    """A small pool of reused aiosmtplib connections to one SMTP server."""

    def __init__(self, url: str, *, size: int = 4, timeout: float = 30.0, helo: str | None = None,
                 tls: ssl.SSLContext | None = None):
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps"):
            raise ValueError(f"POSTROOM_SMTP_URL must be smtp:// or smtps://, not {parts.scheme}://")
        self.host = parts.hostname or "127.0.0.1"
        self.implicit_tls = parts.scheme == "smtps"
        self.port = parts.port or (465 if self.implicit_tls else 25)
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password or "")
        self.timeout = timeout
        self.helo = helo
        self.tls = tls or tls_context()
        self._idle: asyncio.LifoQueue[_Client] = asyncio.LifoQueue()
        self._slots = asyncio.Semaphore(size)

    async def _connect(self) -> _Client:
        client = _Client(hostname=self.host, port=self.port, use_tls=self.implicit_tls,
                                 start_tls=False if self.implicit_tls else None,  # None: when offered
                                 tls_context=self.tls, timeout=self.timeout, local_hostname=self.helo)
        await client.connect()
        if self.username:
            if client.get_transport_info("sslcontext") is None:
                client.close()
                raise CleartextLoginRefused(
                    f"not sent: {self.host} offers no STARTTLS, and the credentials in POSTROOM_SMTP_URL "
                    "are never sent in clear")
            await client.login(self.username, self.password)
        return client

    def _pooled(self) -> _Client | None:
        while not self._idle.empty():
            candidate = self._idle.get_nowait()
            if candidate.is_connected:
                return candidate
        return None

    async def send(self, mail_from: str, recipients: list[str], data: bytes, name: str = "",
                   start_by: float | None = None, crlf_only: bool = False,
                   halted: Callable[[], bool] | None = None) -> dict[str, Outcome] | None:
        """Each recipient's outcome; None when a connection slot came free only after
        `start_by` (time.monotonic()), or once the transport drains: the transaction was
        not started. The whole transaction,
        connecting included, takes at most the timeout. `crlf_only`: `data` is known to end
        every line CRLF (composed by pipelines/mime), so it is not checked."""
        try:
            return await self._send(mail_from, recipients, data, start_by, crlf_only, halted)
        except Exception as error:  # the promise: never raise; the caller sees outcomes only
            return unexpected(recipients, error)

    async def _send(self, mail_from: str, recipients: list[str], data: bytes, start_by: float | None,
                    crlf_only: bool = False, halted: Callable[[], bool] | None = None) -> dict[str, Outcome] | None:
        wire, outcomes = _wire_forms(recipients)
        if not wire:
            return outcomes
        smtputf8 = not (data.isascii() and mail_from.isascii() and all(a.isascii() for a in wire))
        async with self._slots:
            if not self._may_start(start_by, halted):
                return None
            return {**outcomes, **await self._transaction(mail_from, wire, data, smtputf8, crlf_only)}

    async def _transaction(self, mail_from: str, wire: dict[str, str], data: bytes, smtputf8: bool,
                           crlf_only: bool) -> dict[str, Outcome]:
        """One transaction over a pooled (or new) connection, within the timeout: the
        outcome of each recipient of `wire` (wire form → the recipient as named)."""
        client = self._pooled()
        try:
            async with asyncio.timeout(self.timeout):
                if client is None:
                    client = await self._connect()
                if smtputf8 and not client.supports_extension("smtputf8"):
                    self._idle.put_nowait(client)
                    why = _needs_smtputf8(list(wire), self.host)
                    return {r: Outcome(553, why, local=True) for r in wire.values()}
                errors, _ = await client.send_composed(mail_from, list(wire), data, smtputf8=smtputf8,
                                                        crlf_only=crlf_only)
        except aiosmtplib.SMTPRecipientsRefused as refused:  # every RCPT refused: the connection is sound
            assert client is not None, "refused by send_composed, on a connection"
            self._idle.put_nowait(client)
            return {wire.get(r.recipient, r.recipient): Outcome(r.code, r.message) for r in refused.recipients}
        except BaseException as error:
            _drop(client)
            outcome = _outcome_of(error, self.timeout)
            if outcome is None:
                raise
            return {r: outcome for r in wire.values()}
        self._idle.put_nowait(client)
        outcomes = {r: Outcome(250, "accepted") for r in wire.values()}
        for address, (code, text) in (errors or {}).items():
            outcomes[wire.get(address, address)] = Outcome(code, text)
        return outcomes

    async def close(self) -> None:
        while not self._idle.empty():
            await _quietly_close(self._idle.get_nowait())


def _wire_forms(recipients: list[str]) -> tuple[dict[str, str], dict[str, Outcome]]:
    """The recipients by wire form (wire form → the recipient as the message names it),
    and the outcome of each that has none (never sent)."""
    wire: dict[str, str] = {}
    refused: dict[str, Outcome] = {}
    for recipient in recipients:
        try:
            wire[wire_form(recipient)] = recipient
        except ValueError as error:
            refused[recipient] = Outcome(553, f"5.1.3 not sent: {error}", local=True)
    return wire, refused


def _outcome_of(error: BaseException, timeout: float) -> Outcome | None:
    """What a transaction's error says of each of its recipients (its connection is
    dropped); None for an error nobody foresaw, which the caller raises."""
    if isinstance(error, aiosmtplib.SMTPResponseException):
        return Outcome(error.code, error.message)
    if isinstance(error, CleartextLoginRefused):
        return Outcome(0, str(error), local=True)
    if isinstance(error, (aiosmtplib.SMTPException, OSError, asyncio.TimeoutError)):
        why = f"no answer within {timeout:g} s" if isinstance(error, TimeoutError) and not str(error) else error
        return Outcome(0, f"connection failed: {why}")
    if isinstance(error, (ValueError, UnicodeError)):  # an address the client will not write
        return Outcome(553, f"5.1.3 not sent: {error}", local=True)
    return None


def _needs_smtputf8(wire_addresses: list[str], host: str) -> str:
    non_ascii = [a for a in wire_addresses if not a.isascii()]
    what = (f"the address {', '.join(non_ascii)} has a non-ASCII local part" if non_ascii
            else "the message carries a non-ASCII address in its header")
    return f"5.6.7 not sent: {what}, which needs SMTPUTF8, and the next hop ({host}) does not offer it"


def _drop(client) -> None:
    """Close a connection in a state we do not trust at once, without a QUIT round trip: a
    hung server must not hold the sender past the transaction's time bound."""
    if client is not None:
        client.close()


async def _quietly_close(client) -> None:
    if client is None:
        return
    try:
        await client.quit()
    except Exception:  # closing a broken connection; nothing useful to report
        client.close()


def transport_for(settings):
    """The transport `settings` (pipelines.core.settings.Settings) ask for."""
    if settings.smtp_url:
        return SmtpTransport(settings.smtp_url, size=settings.smtp_connections,
                             timeout=settings.smtp_timeout_seconds,
                             helo=announce_ehlo(settings),
                             tls=tls_context(settings.smtp_tls_verify, settings.smtp_tls_ca_file))
    return CaptureTransport(settings.data_dir / "outbox")
