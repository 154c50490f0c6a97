"""Rendering off the event loop, in real processes: results come back as render_all gives
them, a killed render process costs one retry of its job, not the worker."""

import asyncio
import email
import email.policy
import os
import signal
import subprocess
import sys
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from actors import render_pool, runtime
from pipelines.core.settings import Settings
from pipelines.messages import dkim
from pipelines.templates.personalise import stored_template_data
from pipelines.templates.render_message import RenderContext, render_all
from tests.support.polling import wait_until

pytestmark = pytest.mark.e2e  # render processes, and a worker process the test kills

PAIR = dkim.generate_key_pair()


def job(count: int):
    settings = Settings(secret_key="k", base_url="https://mail.example", render_processes=2)
    signer = dkim.Signer("postroom.test", "pr1", dkim._load_private_key(PAIR.private_pem))
    messages = [{"_id": f"msg_{i}", "workspace_id": "w1", "kind": "transactional", "to": [f"r{i}@x.test"],
                 "subject": "No. {{n}}", "html": "<p>{{#each rows}}{{this}}{{/each}}</p>",
                 **stored_template_data({"n": i, "rows": list(range(i % 3))}), "text": None,
                 "from_address": "news@postroom.test", "from_name": "News", "reply_to": None,
                 "track_opens": False, "track_clicks": False} for i in range(count)]
    if count > 7:
        messages[7]["template_data_json"] = '["not", "an", "object"]'   # fails alone, in the pool as inline
    return messages, RenderContext(settings=settings, workspaces={"w1": {"_id": "w1", "name": "W"}},
                                   signers={dkim.SHARED: signer})


@pytest.fixture
def pool_settings(monkeypatch):
    # the process's runtime as it was, back after the test: an in-process front of the
    # same test process (tests/front) publishes through it
    monkeypatch.setattr(runtime, "_settings", runtime._settings)
    monkeypatch.setattr(runtime, "_publisher", runtime._publisher)

    def configure(processes: int):
        runtime.configure(Settings(secret_key="k", render_processes=processes))
    yield configure
    render_pool.StartRenderPool().after_worker_shutdown(None, None)  # where a worker stops its pool


def contents(rendered: list[dict]) -> list[tuple]:
    """What each message says (its MIME boundaries, Date and signature differ per render)."""
    def parsed(data: str):
        return email.message_from_bytes(data.encode(), policy=email.policy.default)
    return [(r["_id"], r["mail_from"], r["recipients"], parsed(r["data"])["Subject"],
             parsed(r["data"]).get_body(("html",)).get_content()) for r in rendered]


@pytest.mark.parametrize("processes", [2, 0])
def test_off_the_loop_gives_what_render_all_gives_slice_by_slice(pool_settings, processes):
    pool_settings(processes)
    messages, ctx = job(45)                     # three slices
    result = asyncio.run(render_pool.render_off_loop(messages, ctx))
    expected = render_all(messages, ctx)
    assert [r["_id"] for r in result.rendered] == [m["_id"] for m in messages if m["_id"] != "msg_7"]
    assert contents(result.rendered) == contents(expected.rendered)
    assert all(r["data"].startswith("DKIM-Signature: ") for r in result.rendered)
    assert result.failed == expected.failed and list(result.failed) == ["msg_7"]


def test_a_killed_render_process_fails_one_job_and_the_next_gets_a_new_pool(pool_settings):
    pool_settings(1)   # one process: the job cannot slip through to a live one
    messages, ctx = job(3)
    render_pool.StartRenderPool().after_worker_boot(None, None)
    pid = render_pool._executor(1).submit(os.getpid).result(timeout=60)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(BrokenProcessPool):
        asyncio.run(render_pool.render_off_loop(messages, ctx))
    result = asyncio.run(render_pool.render_off_loop(messages, ctx))
    assert len(result.rendered) == 3


WORKER = """
import os, sys, time
from actors import render_pool, runtime
from pipelines.core.settings import Settings
runtime.configure(Settings(secret_key="k", render_processes=2))
render_pool.StartRenderPool().after_worker_boot(None, None)
pool = render_pool._executor(2)
pids = set()
while len(pids) < 2:
    pids |= {pool.submit(os.getpid).result(timeout=60) for _ in range(4)}
print(" ".join(map(str, pids)), flush=True)
time.sleep(600)
"""


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_render_processes_end_when_their_worker_is_killed():
    worker = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    try:
        pids = [int(p) for p in worker.stdout.readline().split()]
        assert len(pids) == 2 and all(running(p) for p in pids)
    finally:
        worker.kill()   # SIGKILL: the worker cannot stop its pool
        worker.wait()
    wait_until(lambda: not any(running(p) for p in pids), timeout=30, what="the render processes ended")
