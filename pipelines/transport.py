"""Where composed messages go: an SMTP server, or (embedded default) a capture folder so
nothing leaves the machine. Both report per-recipient outcomes the same way."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from pathlib import Path
from urllib.parse import urlsplit

import aiosmtplib


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the next hop said. `code` 250 is accepted; 4xx transient; 5xx permanent."""
    code: int
    text: str

    @property
    def accepted(self) -> bool:
        return 200 <= self.code < 300

    @property
    def transient(self) -> bool:
        return 400 <= self.code < 500 or self.code == 0

    @property
    def permanent(self) -> bool:
        return self.code >= 500


class CaptureTransport:
    """Writes each message as an .eml file under `folder` (the local capture outbox)."""

    def __init__(self, folder: Path):
        self.folder = folder

    async def send(self, mail_from: str, recipients: list[str], data: bytes, name: str,
                   start_by: float | None = None) -> dict[str, Outcome] | None:
        if start_by is not None and time.monotonic() > start_by:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{name}.eml"
        tmp = path.with_suffix(".tmp")
        header = f"X-Envelope-From: {mail_from}\r\nX-Envelope-To: {', '.join(recipients)}\r\n".encode()
        await asyncio.to_thread(_write, tmp, header + data)
        os.replace(tmp, path)
        return {r: Outcome(250, "captured") for r in recipients}

    async def close(self) -> None:
        return None


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


class SmtpTransport:
    """A small pool of reused aiosmtplib connections to one SMTP server."""

    def __init__(self, url: str, *, size: int = 4, timeout: float = 30.0, local_hostname: str | None = None):
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (465 if parts.scheme == "smtps" else 25)
        self.use_tls = parts.scheme == "smtps"
        self.username = parts.username
        self.password = parts.password
        self.timeout = timeout
        self.local_hostname = local_hostname
        self._idle: asyncio.LifoQueue[aiosmtplib.SMTP] = asyncio.LifoQueue()
        self._slots = asyncio.Semaphore(size)

    async def _connect(self) -> aiosmtplib.SMTP:
        client = aiosmtplib.SMTP(hostname=self.host, port=self.port, use_tls=self.use_tls,
                                 timeout=self.timeout, local_hostname=self.local_hostname,
                                 start_tls=False)
        await client.connect()
        if self.username:
            await client.login(self.username, self.password or "")
        return client

    async def send(self, mail_from: str, recipients: list[str], data: bytes, name: str = "",
                   start_by: float | None = None) -> dict[str, Outcome] | None:
        """Each recipient's outcome; None when a connection slot came free only after
        `start_by` (time.monotonic()): the transaction was not started. The whole transaction,
        connecting included, takes at most the timeout."""
        async with self._slots:
            if start_by is not None and time.monotonic() > start_by:
                return None
            client = None
            while not self._idle.empty():
                candidate = self._idle.get_nowait()
                if candidate.is_connected:
                    client = candidate
                    break
            try:
                async with asyncio.timeout(self.timeout):
                    if client is None:
                        client = await self._connect()
                    errors, _ = await client.sendmail(mail_from, recipients, data)
            except aiosmtplib.SMTPRecipientsRefused as refused:
                self._idle.put_nowait(client)
                return {r.recipient: Outcome(r.code, r.message) for r in refused.recipients}
            except aiosmtplib.SMTPResponseException as error:
                _drop(client)
                return {r: Outcome(error.code, error.message) for r in recipients}
            except (aiosmtplib.SMTPException, OSError, asyncio.TimeoutError) as error:
                _drop(client)
                return {r: Outcome(0, f"connection failed: {error}") for r in recipients}
            self._idle.put_nowait(client)
            outcomes = {r: Outcome(250, "accepted") for r in recipients}
            for recipient, (code, text) in (errors or {}).items():
                outcomes[recipient] = Outcome(code, text)
            return outcomes

    async def close(self) -> None:
        while not self._idle.empty():
            await _quietly_close(self._idle.get_nowait())


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


def transport_for(smtp_url: str | None, data_dir: Path, *, size: int, timeout: float):
    if smtp_url:
        return SmtpTransport(smtp_url, size=size, timeout=timeout)
    return CaptureTransport(data_dir / "outbox")
