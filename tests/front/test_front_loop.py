"""The front's event loop does only I/O for every caller (issue #30.6): the OpenAPI
documents are built once and served as kept bytes, large JSON bodies are parsed in parser
processes, bodies declared too large are refused before they are read, and a body sent
slowly is cut off after POSTROOM_REQUEST_BODY_TIMEOUT_SECONDS. Measured on a real front
process, with the load coming from another process (so the test's own GIL is not timed)."""

from __future__ import annotations

import contextlib
import json
import queue
import select
import socket
import statistics
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.support.quiet_turns import last_settle
from tests.support.services import another_front, run_postroom

pytestmark = pytest.mark.e2e  # fronts of its own, loaded from other processes

BODY_TIMEOUT_SECONDS = 2
# Issue #30's bar (21.7 s before the documents were kept and big bodies left the loop).
# The test is `quiet` (it runs while no other test of the suite does): alone, it measured
# p99 20-54 ms (a lone probe waits up to ~0.45 s once, which a p99 of ~3,000 probes leaves out).
HEALTH_P99_SECONDS = 0.100
HUGE_BODY_KEYS = 2_500_000  # issue #30: two 30 MB bodies

# 8 clients looping on the two documents, and two 30 MB JSON bodies of 2.5 M keys each (a
# valid key may send them: only the parse tells they are refused). Prints one JSON line per
# event: "documents" once every client has had a document, then one per huge body answered.
_LOAD_SCRIPT = """
import json, sys, threading, httpx
base, key, keys = sys.argv[1], sys.argv[2], int(sys.argv[3])
stop = threading.Event()
fetched = threading.Barrier(9)
def fetch(path):
    with httpx.Client(timeout=120) as client:
        first = True
        while not stop.is_set():
            response = client.get(base + path)
            assert response.status_code == 200, response.status_code
            if first:
                first = False
                fetched.wait()
def huge():
    body = ('{"email":"huge@example.org","attributes":{' +
            ",".join(f'"k{i}":1' for i in range(keys)) + "}}").encode()
    response = httpx.post(base + "/api/v1/contacts", content=body, timeout=300,
                          headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    print(json.dumps({"huge": response.status_code, "bytes": len(body),
                      "code": response.json()["error"]["code"]}), flush=True)
clients = [threading.Thread(target=fetch, args=(p,), daemon=True) for p in ["/openapi.yaml", "/openapi.json"] * 4]
for c in clients:
    c.start()
fetched.wait()
print(json.dumps({"documents": "served"}), flush=True)
bodies = [threading.Thread(target=huge) for _ in range(2)]
for b in bodies:
    b.start()
for b in bodies:
    b.join()
sys.stdin.read()  # the test closes stdin once it has measured
stop.set()
"""


def _front_with_key(env: dict, run_dir, name: str):
    workspace = json.loads(run_postroom(env, "workspace", "create", "Loop", "--json").stdout)
    key = json.loads(run_postroom(env, "key", "create", "--workspace", workspace["id"], "--json").stdout)["key"]
    log_dir = run_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    with another_front(name, env, log_dir) as base_url:
        yield base_url, key


@pytest.fixture(scope="module")
def front(service_env, run_dir):
    yield from _front_with_key(service_env[0], run_dir, "front-loop")


@pytest.fixture(scope="module")
def impatient_front(service_env, run_dir):
    """A front that gives a request body BODY_TIMEOUT_SECONDS."""
    env = {**service_env[0], "POSTROOM_REQUEST_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT_SECONDS)}
    yield from _front_with_key(env, run_dir, "front-impatient")


def health_seconds(client: httpx.Client, base_url: str) -> float:
    started = time.perf_counter()
    response = client.get(base_url + "/api/v1/health")
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.text
    return elapsed


@pytest.mark.slow
@pytest.mark.quiet  # a p99 of its own load, not of the rest of the suite's
def test_health_stays_fast_while_documents_are_fetched_in_a_loop_and_huge_bodies_are_parsed(front):
    base_url, key = front
    with httpx.Client(timeout=60) as client:  # for the record: the same probe with no load
        idle = sorted(health_seconds(client, base_url) for _ in range(50))
    load = subprocess.Popen([sys.executable, "-c", _LOAD_SCRIPT, base_url, key, str(HUGE_BODY_KEYS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    # the load's lines, read in a thread: a select() on the pipe misses a second line that
    # arrived with the first (it waits in the reader's buffer), and the probing never ends
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in load.stdout], daemon=True).start()
    try:
        assert json.loads(lines.get(timeout=120)) == {"documents": "served"}
        answers, timings = [], []
        with httpx.Client(timeout=60) as client:
            # the huge bodies' answers come on the load's stdout; probe until both are in
            deadline = time.monotonic() + 300
            while len(answers) < 2:
                assert time.monotonic() < deadline and load.poll() is None, f"huge bodies unanswered ({load.poll()})"
                timings.append(health_seconds(client, base_url))
                with contextlib.suppress(queue.Empty):
                    answers.append(json.loads(lines.get_nowait()))
            for _ in range(20):  # and a few more while the document loops go on
                timings.append(health_seconds(client, base_url))
        load.stdin.close()
        load.wait(timeout=60)
    finally:
        load.kill()
    p99 = statistics.quantiles(timings, n=100)[98] if len(timings) >= 2 else timings[0]
    print(f"\nhealth under load: n={len(timings)} median={statistics.median(timings) * 1000:.1f} ms "
          f"p99={p99 * 1000:.1f} ms max={max(timings) * 1000:.1f} ms (idle: median {idle[25] * 1000:.1f} ms, "
          f"max {idle[-1] * 1000:.1f} ms); huge bodies: {answers}; before: {last_settle}")
    assert all(a["bytes"] > 30_000_000 and a["huge"] == 400 and a["code"] == "validation_error"
               for a in answers), answers
    assert p99 < HEALTH_P99_SECONDS, f"/health p99 {p99 * 1000:.0f} ms under load"


def test_the_documents_are_served_from_kept_bytes_with_an_etag(front):
    base_url, _ = front
    first = httpx.get(base_url + "/openapi.yaml", timeout=60)
    again = httpx.get(base_url + "/openapi.yaml", headers={"If-None-Match": first.headers["ETag"]}, timeout=60)
    assert first.status_code == 200 and first.headers["content-type"].startswith("application/yaml")
    assert again.status_code == 304 and again.content == b""
    as_json = httpx.get(base_url + "/openapi.json", timeout=60)
    assert as_json.status_code == 200 and as_json.headers["ETag"] != first.headers["ETag"]
    assert as_json.json()["openapi"].startswith("3.")


def test_the_kept_documents_answer_head_plain_and_gzip_with_the_callers_request_id(front):
    """Once built, the documents are answered in front of the app (front/openapi.KeptDocumentsFirst):
    the same answers as the app's, with the request id and the encodings a client asks for."""
    base_url, _ = front
    httpx.get(base_url + "/openapi.json", timeout=60)  # built by now
    plain = httpx.get(base_url + "/openapi.json", headers={"Accept-Encoding": "identity", "X-Request-Id": "probe-1"})
    packed = httpx.get(base_url + "/openapi.json", headers={"Accept-Encoding": "gzip", "X-Request-Id": "probe-2"})
    head = httpx.head(base_url + "/openapi.yaml")
    assert plain.headers.get("content-encoding") is None and packed.headers["content-encoding"] == "gzip"
    assert plain.json() == packed.json() and plain.headers["ETag"] != packed.headers["ETag"]
    assert (plain.headers["X-Request-Id"], packed.headers["X-Request-Id"]) == ("probe-1", "probe-2")
    assert "accept-encoding" in plain.headers["vary"].lower()
    assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 0


def test_a_body_declared_too_large_is_refused_before_it_is_sent(front):
    base_url, key = front
    limit = 32 * 1024 * 1024
    with socket.create_connection(_address(base_url), timeout=10) as sock:
        sock.sendall(_head("POST", "/api/v1/contacts", limit + 1, key))  # and not one byte of body
        status, _ = _answer(sock)
    assert status == 413


@pytest.mark.parametrize("authorized", [True, False], ids=["read-by-its-view", "answered-before-it-is-read"])
def test_a_body_trickled_slowly_is_cut_off_at_the_body_timeout(impatient_front, authorized):
    base_url, key = impatient_front
    with socket.create_connection(_address(base_url), timeout=BODY_TIMEOUT_SECONDS + 10) as sock:
        sock.sendall(_head("POST", "/api/v1/contacts", 10_000, key if authorized else None))
        started = time.monotonic()
        status, closed_at = None, None
        # 10 bytes a second, as the client did, until the front answers or hangs up
        while time.monotonic() - started < BODY_TIMEOUT_SECONDS + 8:
            try:
                sock.sendall(b"          ")
            except OSError:
                closed_at = time.monotonic()
                break
            readable, _, _ = _select(sock, 1.0)
            if readable:
                status, closed = _answer(sock)
                if closed:
                    closed_at = time.monotonic()
                    break
        assert closed_at is not None, f"still connected after {time.monotonic() - started:.0f} s (answer {status})"
    assert closed_at - started < BODY_TIMEOUT_SECONDS + 5
    assert status in (None, 401, 408)


def _address(base_url: str) -> tuple[str, int]:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _head(method: str, path: str, length: int, key: str | None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", "Content-Type: application/json",
             f"Content-Length: {length}"] + ([f"Authorization: Bearer {key}"] if key else [])
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _select(sock, timeout):
    return select.select([sock], [], [], timeout)


def _answer(sock) -> tuple[int | None, bool]:
    """The status of the answer waiting on `sock` (None if none came), and whether the
    front closed the connection after it."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except OSError:
            return _status(data), True
        if not chunk:
            return _status(data), True
        data += chunk
        if b"\r\n\r\n" in data and not _select(sock, 1.0)[0]:
            return _status(data), False


def _status(data: bytes) -> int | None:
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else None
