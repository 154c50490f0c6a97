"""What tests use: the service's address, the store (through the real async driver, on a
loop of its own), and tenants (a workspace with an API key and a client). The front is the
real `postroom front` process, or the same app in the test process (tests/support/in_process.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import uuid
from pathlib import Path

import httpx

from mongo import api_keys as key_store
from mongo import workspaces
from mongo.client import connect
from pipelines.messages.sender import workspace_local_part


class StoreThread:
    """Runs coroutines against the store on a private event loop thread, so plain
    (synchronous) tests can read and seed the store through the async driver."""

    def __init__(self, url: str, database: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def _connect():
            return connect(url, database)
        self.client, self.db = self.call(_connect())

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    def run(self, fn, *args, **kwargs):
        """Call `fn(db, *args, **kwargs)` (an async store function) and return its result."""
        return self.call(fn(self.db, *args, **kwargs))

    def close(self):
        self.call(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


@dataclasses.dataclass
class Tenant:
    workspace_id: str
    key: str
    key_id: str
    client: httpx.Client

    def get(self, path, **kw):
        return self.client.get(path, **kw)

    def post(self, path, json=None, **kw):
        return self.client.post(path, json=json, **kw)

    def patch(self, path, json=None, **kw):
        return self.client.patch(path, json=json, **kw)

    def put(self, path, json=None, **kw):
        return self.client.put(path, json=json, **kw)

    def delete(self, path, json=None, **kw):
        if json is not None:
            return self.client.request("DELETE", path, json=json, **kw)
        return self.client.delete(path, **kw)


class ReadAgainOnUnavailable(httpx.HTTPTransport):
    """Asks a GET again after a 503 or a connection the front closed. For stacks on a faked
    clock only: libfaketime moves the monotonic clock too, so a jump lands on whatever the
    front has in flight as a timeout of days — a store call (the front rightly answers 503
    service_unavailable, as in an outage) or an idle keep-alive connection (the front
    closes it, and the client's next request on it is reset). A client reads again; a write
    is never repeated (it may have happened)."""

    ATTEMPTS = 3

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(self.ATTEMPTS - 1):
            if request.method != "GET":
                break
            try:
                response = super().handle_request(request)
            except (httpx.ReadError, httpx.RemoteProtocolError):
                continue
            if response.status_code != 503:
                return response
            response.read()
            response.close()
        return super().handle_request(request)


@dataclasses.dataclass
class Service:
    base_url: str
    env: dict
    store: StoreThread
    log_dir: Path
    smtp: object
    # A stack whose clock the test moves (libfaketime) sets this: see ReadAgainOnUnavailable.
    retry_unavailable_reads: bool = False
    # Set: API clients hand their requests to the front in this process instead of to base_url.
    transport: httpx.BaseTransport | None = None
    _clients: list = dataclasses.field(default_factory=list)
    _conformance: object = None

    @property
    def api(self) -> str:
        return self.base_url + "/api/v1"

    def client(self, key: str | None = None) -> httpx.Client:
        """An API client; every JSON answer it gets is checked against /openapi.yaml."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        transport = self.transport or (ReadAgainOnUnavailable() if self.retry_unavailable_reads else None)
        client = httpx.Client(base_url=self.api, headers=headers, timeout=30, transport=transport,
                              event_hooks={"response": [self.check_documented]})
        self._clients.append(client)
        return client

    def check_documented(self, response: httpx.Response) -> None:
        """The answer is what the document says this operation answers with this status."""
        if "json" not in response.headers.get("content-type", ""):
            return
        if self._conformance is None:
            from tests.support.openapi_check import Conformance
            try:
                with httpx.Client(base_url=self.base_url, transport=self.transport, timeout=30) as plain:
                    self._conformance = Conformance(plain.get("/openapi.json").json())
            except httpx.HTTPError:  # the front is down (a fault test): check the next answer instead
                return
        response.read()
        problems = self._conformance.problems(response.request.method, response.request.url.path,
                                              response.status_code, response.json())
        assert not problems, "answer differs from /openapi.yaml:\n" + "\n".join(problems)

    def tenant(self, name: str | None = None, *, from_email: str | None = "sender@example.com",
               sandbox: bool = False, permissions: list[str] | None = None,
               rate_limit: int | None = 100_000, email_rate_limit: int | None = 100_000,
               settings: dict | None = None) -> Tenant:
        name = name or f"ws-{uuid.uuid4().hex[:6]}"

        async def make(db):
            ws = await workspaces.create(db, name, from_email=from_email, settings=settings)
            await workspaces.update_settings(db, ws["_id"], {
                "sending_local_part": workspace_local_part(name, ws["_id"])})
            key, doc = await key_store.create(db, ws["_id"], name="test", sandbox=sandbox,
                                              permissions=permissions or ["*"], rate_limit=rate_limit,
                                              email_rate_limit=email_rate_limit)
            return ws, key, doc
        ws, key, doc = self.store.call(make(self.store.db))
        return Tenant(ws["_id"], key, doc["_id"], self.client(key))

    def extra_key(self, tenant: Tenant, **options) -> Tenant:
        """Another key for the same workspace (e.g. a sandbox or a restricted one)."""
        options.setdefault("permissions", ["*"])
        options.setdefault("sandbox", False)
        options.setdefault("name", "extra")
        key, doc = self.store.call(key_store.create(self.store.db, tenant.workspace_id, **options))
        return Tenant(tenant.workspace_id, key, doc["_id"], self.client(key))

    def close(self):
        for client in self._clients:
            client.close()
