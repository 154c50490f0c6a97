"""A real HTTP server on loopback, in a thread, standing in for a customer's webhook
receiver. It records every request, checks signatures with the verification helper
published in docs/webhooks.md (extracted and executed, so the docs cannot drift from what the
tests prove), and can be scripted: answer the next N requests with an error, answer
slowly, or be down (port closed) and come back on the same port."""

from __future__ import annotations

import dataclasses
import http.server
import json
import re
import threading
import time
from pathlib import Path

WEBHOOK_DOCS = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"


def readme_verifier():
    """The `verify_signature` function exactly as docs/webhooks.md publishes it."""
    match = re.search(r"```python\n(.*?)```", WEBHOOK_DOCS.read_text(), re.S)
    assert match, "docs/webhooks.md has no python verification helper"
    namespace: dict = {}
    exec(compile(match.group(1), "docs/webhooks.md#verify_signature", "exec"), namespace)
    return namespace["verify_signature"]


@dataclasses.dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    status: int  # what we answered
    verified: bool | None  # None when no secret was known for its webhook id
    at: float

    @property
    def json(self):
        return json.loads(self.body)

    @property
    def delivery_id(self) -> str | None:
        return self.headers.get("x-service-delivery-id")


class HttpReceiver:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, tls=None, url_host: str | None = None):
        self.host = host
        self.tls = tls  # an ssl.SSLContext (server side) to answer HTTPS instead
        self.url_host = url_host or host
        self.port = port
        self.requests: list[Received] = []
        self.secrets: dict[str, str] = {}  # webhook id -> signing secret
        self.verify = readme_verifier()
        self.lock = threading.Lock()
        self._failures: list[int] = []
        self.delay_seconds = 0.0
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ---------------------------------------------------------------
    def fail_next(self, count: int, status: int = 500) -> HttpReceiver:
        with self.lock:
            self._failures.extend([status] * count)
        return self

    def trust(self, webhook_id: str, secret: str) -> HttpReceiver:
        self.secrets[webhook_id] = secret
        return self

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.url_host}:{self.port}/hook"

    # -- life cycle ----------------------------------------------------------------
    def start(self) -> HttpReceiver:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                receiver._answer(self, body)

            do_PUT = do_PATCH = do_GET = do_POST  # automation webhook steps use these too

            def log_message(self, *args):
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self._server = http.server.ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        if self.tls is not None:
            self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the port: connections are refused until `start()` again."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _answer(self, handler, body: bytes) -> None:
        headers = {k.lower(): v for k, v in handler.headers.items()}
        secret = self.secrets.get(headers.get("x-service-webhook-id", ""))
        verified = None if secret is None else self.verify(
            secret, headers.get("x-service-signature", ""), body)
        with self.lock:
            status = 401 if verified is False else (self._failures.pop(0) if self._failures else 200)
        if self.delay_seconds:
            time.sleep(self.delay_seconds)
        with self.lock:
            self.requests.append(Received(handler.command, handler.path, headers, body, status,
                                          verified, time.time()))
        payload = b'{"ok":true}' if status < 300 else b'{"ok":false}'
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    # -- reading back -----------------------------------------------------------------
    def received(self, event: str | None = None) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if event is None or r.headers.get("x-service-event") == event]

    def accepted(self, event: str | None = None) -> list[Received]:
        """Requests answered 2xx, once per delivery id (what a deduplicating receiver keeps)."""
        seen, out = set(), []
        for r in self.received(event):
            if 200 <= r.status < 300 and r.delivery_id not in seen:
                seen.add(r.delivery_id)
                out.append(r)
        return out

    def wait_for(self, predicate, timeout: float = 20.0, what: str = "requests"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = predicate(self)
            if result:
                return result
            time.sleep(0.05)
        seen = [(r.status, r.headers.get("x-service-event")) for r in self.received()]
        raise AssertionError(f"receiver never saw {what}; got {seen}")


def subscribe(tenant, receiver: HttpReceiver, event: str = "contact.created") -> dict:
    """A webhook subscription of `tenant` to `event` at `receiver`, whose signatures the
    receiver then checks with the subscription's secret."""
    response = tenant.post("/webhooks/triggers", json={"targetUrl": receiver.url, "event": event})
    assert response.status_code == 201, response.text
    data = response.json()["data"]
    receiver.trust(data["id"], data["secret"])
    return data
