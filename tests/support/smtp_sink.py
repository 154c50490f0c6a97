"""A real SMTP receiver (aiosmtpd) that tests read messages back from. Behaviour per
recipient can be scripted: defer (4xx) the first N attempts, or reject (5xx)."""

from __future__ import annotations

import asyncio
import collections
import email
import email.policy
import threading
import time

from aiosmtpd.controller import Controller


class Received:
    def __init__(self, mail_from: str, rcpt_tos: list[str], data: bytes):
        self.mail_from = mail_from
        self.rcpt_tos = rcpt_tos
        self.data = data
        self.message = email.message_from_bytes(data, policy=email.policy.default)

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

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        key = address.lower()
        with self.lock:
            self.attempts[key] += 1
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
        with self.lock:
            for d in domains:
                self.in_flight[d] -= 1
            self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 2.0.0 queued"


class SmtpSink:
    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        from ops.embedded_store import free_port
        self.handler = SinkHandler()
        self.port = port or free_port()
        self.controller = Controller(self.handler, hostname=host, port=self.port,
                                     data_size_limit=64 * 1024 * 1024)
        self.url = f"smtp://{host}:{self.port}"

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

    def reject(self, address: str, code: int = 550, text: str = "5.1.1 user unknown") -> None:
        with self.handler.lock:
            self.handler.rejects[address.lower()] = (code, text)
