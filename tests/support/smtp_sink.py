"""A real SMTP receiver (aiosmtpd) that tests read messages back from. Behaviour per
recipient can be scripted: defer (4xx) the first N attempts, or reject (5xx); the whole
relay can defer everything for a while (an outage), answer slowly, offer SMTPUTF8 or not,
STARTTLS or implicit TLS with a test certificate (tests/support/tls.py), and AUTH."""

from __future__ import annotations

import asyncio
import collections
import email
import email.policy
import threading
import time

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP


class Received:
    def __init__(self, mail_from: str, rcpt_tos: list[str], data: bytes, *, helo: str | None = None,
                 tls: bool = False, mail_options: list[str] | None = None, login: str | None = None):
        self.mail_from = mail_from
        self.rcpt_tos = rcpt_tos
        self.data = data
        self.message = email.message_from_bytes(data, policy=email.policy.default)
        self.helo = helo  # the name the client gave in EHLO
        self.tls = tls  # whether the session was encrypted (STARTTLS or implicit TLS)
        self.mail_options = mail_options or []  # e.g. SMTPUTF8
        self.login = login  # the user the client authenticated as

    def body(self, subtype: str = "html") -> str | None:
        part = self.message.get_body(preferencelist=(subtype,))
        return part.get_content() if part is not None else None


class SinkHandler:
    def __init__(self):
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.defer_counts: dict[str, int] = {}
        self.rejects: dict[str, tuple[int, str]] = {}
        self.attempts = collections.Counter()
        # Slow domains: DATA takes this long, so concurrent deliveries overlap and show.
        self.slow: dict[str, float] = {}
        self.in_flight = collections.Counter()
        self.max_in_flight = collections.Counter()
        self.defer_everyone = False  # an outage: every RCPT answered 451
        self.logins: list[tuple[str, bool]] = []  # (user, over TLS) per AUTH attempt
        self.open_sessions: set[int] = set()  # ids of the sessions whose connection is open
        self.pipelining = False  # offer PIPELINING (RFC 2920) in EHLO, as Postfix and Exim do

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        session.host_name = hostname  # what aiosmtpd records itself when no hook answers EHLO
        if self.pipelining:
            return [*responses[:-1], "250-PIPELINING", responses[-1]]
        return responses

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        key = address.lower()
        with self.lock:
            self.attempts[key] += 1
            if self.defer_everyone:
                return "451 4.3.2 system not accepting mail right now"
            if key in self.rejects:
                code, text = self.rejects[key]
                return f"{code} {text}"
            if self.defer_counts.get(key, 0) > 0:
                self.defer_counts[key] -= 1
                return "451 4.3.0 try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        domains = {r.rsplit("@", 1)[-1].lower() for r in envelope.rcpt_tos}
        with self.lock:
            for d in domains:
                self.in_flight[d] += 1
                self.max_in_flight[d] = max(self.max_in_flight[d], self.in_flight[d])
        delay = max((self.slow.get(d, 0.0) for d in domains), default=0.0)
        if delay:
            await asyncio.sleep(delay)
        tls = server.transport is not None and server.transport.get_extra_info("ssl_object") is not None
        login = session.auth_data.login.decode() if session.authenticated and session.auth_data else None
        with self.lock:
            for d in domains:
                self.in_flight[d] -= 1
            self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), envelope.content,
                                          helo=session.host_name, tls=tls, mail_options=list(envelope.mail_options),
                                          login=login))
        return "250 2.0.0 queued"

    def authenticate(self, server, session, envelope, mechanism, auth_data):
        from aiosmtpd.smtp import AuthResult
        tls = server.transport is not None and server.transport.get_extra_info("ssl_object") is not None
        with self.lock:
            self.logins.append((auth_data.login.decode(), tls))
        return AuthResult(success=True, auth_data=auth_data)


class CountedSession(SMTP):
    """An SMTP session that the handler knows is open from its connection to its loss: once
    none is open, whatever a client had sent has been taken in or dropped with its session."""

    def connection_made(self, transport):
        super().connection_made(transport)
        with self.event_handler.lock:
            self.event_handler.open_sessions.add(id(self))

    def connection_lost(self, error):
        super().connection_lost(error)
        with self.event_handler.lock:
            self.event_handler.open_sessions.discard(id(self))


class CountingController(Controller):
    def factory(self):
        return CountedSession(self.handler, **self.SMTP_kwargs)


class SmtpSink:
    """`smtputf8`: offer SMTPUTF8. `tls`: a tests.support.tls.RelayCertificate, offered by
    STARTTLS (or, with `implicit_tls`, from the first byte: `smtps://`). `auth`: offer AUTH
    (any credentials pass), also before TLS when `auth_in_clear` (a careless server).
    `pipelining`: offer PIPELINING (aiosmtpd reads pipelined commands in any case)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, smtputf8: bool = False, tls=None,
                 implicit_tls: bool = False, auth: bool = False, auth_in_clear: bool = False,
                 pipelining: bool = False):
        from ops.embedded_store import free_port
        self.handler = SinkHandler()
        self.handler.pipelining = pipelining
        self.port = port or free_port()
        options: dict = {"data_size_limit": 64 * 1024 * 1024, "enable_SMTPUTF8": smtputf8}
        if tls is not None and not implicit_tls:
            options["tls_context"] = tls.server_context()
        if auth:
            options.update(authenticator=self.handler.authenticate, auth_require_tls=not auth_in_clear)
        self.controller = CountingController(self.handler, hostname=host, port=self.port,
                                     ssl_context=tls.server_context() if implicit_tls else None, **options)
        self.url = f"{'smtps' if implicit_tls else 'smtp'}://{host}:{self.port}"

    def start(self):
        self.controller.start()
        return self

    def stop(self):
        self.controller.stop()

    def messages_to(self, address: str) -> list[Received]:
        with self.handler.lock:
            return [m for m in self.handler.received if address.lower() in [r.lower() for r in m.rcpt_tos]]

    def wait_for(self, address: str, count: int = 1, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.messages_to(address)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"expected {count} message(s) to {address} within {timeout}s, got "
                             f"{len(self.messages_to(address))}")

    def open_sessions(self) -> int:
        with self.handler.lock:
            return len(self.handler.open_sessions)

    def defer(self, address: str, times: int) -> None:
        with self.handler.lock:
            self.handler.defer_counts[address.lower()] = times

    def slow_down(self, domain: str, seconds: float) -> None:
        with self.handler.lock:
            self.handler.slow[domain.lower()] = seconds

    def max_concurrent(self, domain: str) -> int:
        """The most messages to `domain` that were being received at the same moment."""
        with self.handler.lock:
            return self.handler.max_in_flight[domain.lower()]

    def in_flight(self, domain: str) -> int:
        """Messages to `domain` whose DATA is being received now (started, not answered)."""
        with self.handler.lock:
            return self.handler.in_flight[domain.lower()]

    def reject(self, address: str, code: int = 550, text: str = "5.1.1 user unknown") -> None:
        with self.handler.lock:
            self.handler.rejects[address.lower()] = (code, text)

    def defer_everyone(self, on: bool = True) -> None:
        """An outage of the relay: every recipient answered 451 until switched off."""
        with self.handler.lock:
            self.handler.defer_everyone = on

    def recipient_counts(self) -> collections.Counter:
        """How many messages each recipient (lower-cased) received."""
        with self.handler.lock:
            return collections.Counter(r.lower() for m in self.handler.received for r in m.rcpt_tos)

    def message_ids(self) -> collections.Counter:
        """How many copies of each Message-ID arrived."""
        with self.handler.lock:
            return collections.Counter(m.message["Message-ID"] for m in self.handler.received)
