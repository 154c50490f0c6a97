"""bench/api's load generator: HTTP/1.1 keep-alive POSTs over raw asyncio streams.

httpx cost ~4 ms of CPU a request here, more than either app it drove, so on 2 cores it
was the bottleneck and its own event-loop queueing was most of every latency it
measured. This one writes a prebuilt request and reads the status line, the headers and
a Content-Length body: ~0.1 ms a request, so the apps get the cores and the latencies are
theirs. It reopens a connection the server closes (Hypercorn closes after 1,000 requests
on one) and sends that request again."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit


class Lane:
    """One keep-alive connection."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        """(status, body); once more on a fresh connection when the server closed this one."""
        for attempt in (1, 2):
            if self.writer is None:
                await self._open()
            try:
                self.writer.write(request)
                head = await self.reader.readuntil(b"\r\n\r\n")
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt == 2:
                    raise
                continue
            lines = head.split(b"\r\n")
            status = int(lines[0].split(b" ", 2)[1])
            headers = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(b":")
                    headers[name.strip().lower()] = value.strip()
            if b"content-length" not in headers:
                raise RuntimeError(f"no Content-Length in a {status} answer: {head[:300]!r}")
            body = await self.reader.readexactly(int(headers[b"content-length"]))
            if headers.get(b"connection", b"").lower() == b"close":
                self.close()
            return status, body
        raise AssertionError("unreachable")


def post_request(host: str, path: str, headers: dict[str, str], payload: dict) -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{head}\r\n").encode() + body


async def drive(base_url: str, path: str, headers: dict[str, str], payload: Callable[[int], dict],
                numbers: Iterator[int] | range, connections: int, expect: int) -> tuple[float, list[float]]:
    """POST `payload(i)` for each i over `connections` lanes: (wall seconds, latencies).
    Any answer but `expect` stops the run with what the server said."""
    url = urlsplit(base_url)
    host, port = url.hostname, url.port or 80
    todo = iter(numbers)
    latencies: list[float] = []
    lanes = [Lane(host, port) for _ in range(connections)]

    async def run(lane: Lane) -> None:
        for i in todo:
            request = post_request(f"{host}:{port}", path, headers, payload(i))
            start = time.perf_counter()
            status, body = await lane.exchange(request)
            latencies.append(time.perf_counter() - start)
            if status != expect:
                raise RuntimeError(f"{base_url}{path}: {status} {body[:300]!r}")

    start = time.perf_counter()
    try:
        await asyncio.gather(*(run(lane) for lane in lanes))
    finally:
        for lane in lanes:
            lane.close()
    return time.perf_counter() - start, latencies
