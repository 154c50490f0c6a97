"""Talking SMTP to the real `postroom inbound` port, as a remote MTA returning a report does."""

from __future__ import annotations

import asyncio
import socket
import time

import aiosmtplib


def port_of(service) -> int:
    return int(service.env["POSTROOM_INBOUND_PORT"])


def wait_listening(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"inbound did not listen on {port}")


def _session(service, rcpt: str, raw: bytes | None) -> tuple[int, str]:
    """MAIL FROM:<> (the null return path of a DSN), RCPT TO, and DATA when `raw` is given
    and the recipient was accepted: the last answer's (code, text)."""
    port = port_of(service)
    wait_listening(port)

    async def go():
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, start_tls=False)
        await client.connect()
        try:
            await client.ehlo()
            await client.mail("")
            try:
                answer = await client.rcpt(rcpt)
            except aiosmtplib.SMTPRecipientRefused as refused:
                return refused.code, refused.message
            if raw is not None:
                answer = await client.data(raw)
            return answer.code, answer.message
        finally:
            await client.quit()
    return asyncio.run(go())


def submit(service, raw: bytes, rcpt: str) -> tuple[int, str]:
    return _session(service, rcpt, raw)


def rcpt_answer(service, rcpt: str) -> tuple[int, str]:
    return _session(service, rcpt, None)
