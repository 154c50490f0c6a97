"""`postroom worker` keeps its pool at strength: a worker child killed with SIGKILL (as the
OOM killer would) is replaced, the pool's parent lives on, and mail keeps flowing.

A private stack (own vhost): the pool under test is the only consumer, so an email sent
after the kill can only be delivered by a child the pool started in place of the dead one."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.support.private_stack import private_stack


def child_pids(parent: int) -> set[int]:
    children = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")"
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            children.add(int(entry.name))
    return children


def wait_for_children(parent: int, count: int, timeout: float = 30) -> set[int]:
    deadline = time.monotonic() + timeout
    while len(found := child_pids(parent)) < count:
        assert time.monotonic() < deadline, f"the pool has {len(found)} of {count} children"
        time.sleep(0.1)
    return found


@pytest.fixture
def pool_stack(service, store_url, run_dir):
    with private_stack(service, store_url, run_dir, "pool") as stack:
        yield stack


def send(stack, tenant, address):
    answer = tenant.post("/email/send", json={"to": address, "subject": "Still here", "text": "hello"})
    assert answer.status_code == 202, answer.text
    return stack.smtp.wait_for(address, timeout=45)


@pytest.mark.slow
def test_a_worker_child_killed_with_sigkill_is_replaced_and_mail_keeps_flowing(pool_stack):
    stack = pool_stack
    tenant = stack.tenant()
    pool = stack.start_worker("pool")
    [child] = wait_for_children(pool.proc.pid, 1)
    send(stack, tenant, f"before-{uuid.uuid4().hex[:8]}@pool.example")

    os.kill(child, signal.SIGKILL)
    received = send(stack, tenant, f"after-{uuid.uuid4().hex[:8]}@pool.example")

    assert len(received) == 1
    assert pool.alive(), pool.tail()
    [replacement] = child_pids(pool.proc.pid)
    assert replacement != child
    assert "died (signal SIGKILL)" in pool.log_path.read_text()


@pytest.mark.slow
def test_a_stopped_pool_stops_its_children(pool_stack):
    pool = pool_stack.start_worker("pool")
    children = wait_for_children(pool.proc.pid, 1)
    pool.proc.send_signal(signal.SIGTERM)  # the parent alone, as systemd's KillMode=mixed does
    assert pool.proc.wait(timeout=30) == 0
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in children):
        assert time.monotonic() < deadline, "a child outlived its pool"
        time.sleep(0.1)
