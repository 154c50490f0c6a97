"""The front in the test process: the app `postroom front` serves (front/app.py's factory),
started through its lifespan (store connection, heartbeat) on an event loop thread of its
own, on the real store and the session's RabbitMQ vhost. Tests reach it through an httpx
transport, so a client of it is the same `httpx.Client` a test of the real process uses,
minus the sockets and the subprocess start-up (Quart's `test_app`, httpx's `ASGITransport`).

A job it publishes goes to the session's queues: nobody consumes them while only the fast
tier runs, and the session's worker does when the processes run too (an e2e test)."""

from __future__ import annotations

import asyncio
import threading

import httpx

from front.app import create_app
from pipelines.core.settings import Settings

# How long one request may take before the test sees an error (the real front's clients wait 30 s).
ANSWER_WITHIN_SECONDS = 120


class InProcessFront:
    """The app, started, on a loop thread; `transport()` hands requests to it. The store's
    indexes must be there already (`postroom front` makes them before it serves)."""

    def __init__(self, settings: Settings):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="in-process-front", daemon=True)
        self.thread.start()
        self.app = create_app(settings)
        self.lifespan = self.app.test_app()
        self.call(self.lifespan.startup())
        self.asgi = httpx.ASGITransport(app=self.app)

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=ANSWER_WITHIN_SECONDS)

    def transport(self, origin: str) -> httpx.BaseTransport:
        """Answers requests for `origin` (the service's base URL) in process; a request for any
        other origin (a front a test started of its own) goes over the network to it."""
        return InProcessTransport(self, httpx.URL(origin))

    def close(self) -> None:
        self.call(self.lifespan.shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


class InProcessTransport(httpx.BaseTransport):
    """A synchronous httpx transport that answers each request through the app's ASGI
    interface on the front's loop; the body is read whole first, as an HTTP front would."""

    def __init__(self, front: InProcessFront, origin: httpx.URL):
        self.front, self.origin = front, origin
        self.network = httpx.HTTPTransport()  # shared by every client of the service: never closed by one

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if (request.url.scheme, request.url.host, request.url.port) != \
                (self.origin.scheme, self.origin.host, self.origin.port):
            return self.network.handle_request(request)
        request.read()

        async def answer():
            response = await self.front.asgi.handle_async_request(request)
            return response.status_code, response.headers, await response.aread()
        status, headers, content = self.front.call(answer())
        return httpx.Response(status, headers=headers, content=content, request=request)
