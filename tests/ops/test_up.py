"""`postroom up` on a fresh, empty data dir with nothing else configured: the embedded
store, the in-process broker and the capture outbox, started and stopped cleanly."""

import email
import email.policy
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from pymongo import MongoClient

from ops import embedded_store
from ops.embedded_store import free_port
from tests.support import services
from tests.support.services import Process, run_postroom

pytestmark = pytest.mark.e2e  # `postroom up` processes of its own

STOP_TIMEOUT_SECONDS = 30


@pytest.fixture
def bare_env(tmp_path):
    """Only what a newcomer has: no POSTROOM_* setting but the data dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POSTROOM_")}
    env["POSTROOM_DATA_DIR"] = str(tmp_path / "var")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    yield env
    # a CLI command run beside (or after) `up` starts the data dir's store detached, and
    # it outlives the test unless stopped
    embedded_store.stop_recorded(Path(env["POSTROOM_DATA_DIR"]))


def start_up(env, log_dir: Path, name: str) -> tuple[Process, str]:
    port = free_port()
    process = Process(name, ["up", "--port", str(port), "--threads", "2"], env, log_dir)
    base_url = f"http://127.0.0.1:{port}"
    services.wait_healthy(base_url, process, timeout=90)
    return process, base_url


def stop_with(process: Process, sig: int) -> int:
    os.kill(process.proc.pid, sig)
    try:
        return process.proc.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.stop()
        raise AssertionError(f"postroom up did not stop on {sig}:\n{process.tail()}") from None
    finally:
        process.log.close()


def process_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        status = Path(f"/proc/{pid}/status")
        if status.exists() and "\nState:\tZ" in status.read_text():
            return True  # a zombie no one has reaped yet is not running
        time.sleep(0.1)
    return False


def cli(env, *args):
    return json.loads(run_postroom(env, *args).stdout.strip().splitlines()[-1])


def wait_for_file(folder: Path, name: str, timeout: float = 30) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = folder / name
        if path.exists() and path.stat().st_size > 0:
            return path
        time.sleep(0.1)
    present = sorted(os.listdir(folder)) if folder.exists() else "no folder"
    raise AssertionError(f"{name} never appeared in {folder}: {present}")


@pytest.mark.slow
def test_up_runs_everything_on_embedded_defaults_and_stops_cleanly(bare_env, tmp_path):
    data_dir = Path(bare_env["POSTROOM_DATA_DIR"])
    assert not data_dir.exists()
    log_dir = tmp_path / "logs"
    log_dir.mkdir()

    # First start: nothing configured.
    up, base_url = start_up(bare_env, log_dir, "up-first")
    health = httpx.get(base_url + "/api/v1/health", timeout=10).json()["data"]
    assert (health["status"], health["store"], health["broker"]) == ("ok", "ok", "ok")
    store_pid = json.loads((data_dir / "store.json").read_text())["pid"]
    assert (data_dir / "secret_key").exists()

    # The CLI on the same data dir finds the running store.
    workspace = cli(bare_env, "workspace", "create", "Newcomer", "--from-email", "me@newcomer.example", "--json")
    key = cli(bare_env, "key", "create", "--workspace", workspace["id"], "--json")["key"]
    api = httpx.Client(base_url=base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    try:
        sent = api.post("/email/send", json={"to": "friend@example.org", "subject": "Hello from up",
                                             "html": "<p>It works</p>"})
        assert sent.status_code == 202, sent.text
        message_id = sent.json()["data"]["message_id"]

        # Mail is captured into the outbox as .eml; nothing leaves the machine.
        eml = wait_for_file(data_dir / "outbox", f"{message_id}.eml")
        message = email.message_from_bytes(eml.read_bytes(), policy=email.policy.default)
        assert message["To"] == "friend@example.org"
        assert message["Subject"] == "Hello from up"
        assert message["Reply-To"] == "me@newcomer.example"
        assert "It works" in message.get_body(preferencelist=("html",)).get_content()
    finally:
        api.close()

    assert stop_with(up, signal.SIGTERM) == 0, up.tail()
    assert process_gone(store_pid), "the embedded store outlived `postroom up`"
    assert not (data_dir / "store.json").exists()
    output = up.log_path.read_text()
    assert "postroom stopped" in output
    # the store clients are closed before their loops end: no "Event loop is closed" at exit
    assert "Traceback" not in output and "Event loop is closed" not in output, output[-3000:]

    # Second start on the same data dir: the data survived; stop with Ctrl-C this time.
    again, base_url = start_up(bare_env, log_dir, "up-second")
    second_store_pid = json.loads((data_dir / "store.json").read_text())["pid"]
    with httpx.Client(base_url=base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"}, timeout=30) as api:
        assert api.get("/api-key/permissions").json()["data"]["workspace_id"] == workspace["id"]
        status = api.get(f"/email/{message_id}/status")
        assert status.status_code == 200
        assert status.json()["data"]["subject"] == "Hello from up"
    assert stop_with(again, signal.SIGINT) == 0, again.tail()
    output = again.log_path.read_text()
    assert "Traceback" not in output and "Event loop is closed" not in output, output[-3000:]
    assert process_gone(second_store_pid), "the embedded store outlived `postroom up`"


@pytest.mark.slow
def test_up_after_cli_commands_uses_their_store_and_links_to_the_port_it_binds(bare_env, tmp_path):
    data_dir = Path(bare_env["POSTROOM_DATA_DIR"])
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    # Two commands at once on a fresh data dir, before any `up`: one store between them.
    racers = [subprocess.Popen(services.postroom_command("workspace", "create", f"Early {i}",
                                                         "--from-email", "me@early.example", "--json"),
                               env=bare_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for i in range(2)]
    created = [(r.wait(timeout=120), r.stdout.read(), r.stderr.read()) for r in racers]
    assert [code for code, _, _ in created] == [0, 0], created
    workspace_id = json.loads(created[0][1].strip().splitlines()[-1])["id"]
    store_pid = json.loads((data_dir / "store.json").read_text())["pid"]

    up, base_url = start_up(bare_env, log_dir, "up-after-cli")  # POSTROOM_BASE_URL is not set
    try:
        key = cli(bare_env, "key", "create", "--workspace", workspace_id, "--json")["key"]
        with httpx.Client(base_url=base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"},
                          timeout=30) as api:
            form = api.post("/forms", json={"name": "Sign-up"})
            assert form.status_code == 201, form.text
        assert form.json()["data"]["hosted_url"].startswith(base_url + "/"), form.json()["data"]["hosted_url"]
    finally:
        assert stop_with(up, signal.SIGTERM) == 0, up.tail()
    output = up.log_path.read_text()
    assert "exited at start" not in output and "Traceback" not in output, output[-3000:]
    assert "one-click unsubscribe links are then http://" in output
    # `up` used the store the commands started (it was not up's to stop) and left it running.
    assert json.loads((data_dir / "store.json").read_text())["pid"] == store_pid
    assert not process_gone(store_pid, timeout=0.5)
    assert embedded_store.stop_recorded(data_dir)
    assert process_gone(store_pid)


def test_store_url_prints_the_socket_url_that_reaches_the_store_the_commands_use(bare_env):
    """The embedded store has no TCP port (by design: no authentication); `postroom store
    url` is how mongosh, Compass or a script finds it."""
    data_dir = Path(bare_env["POSTROOM_DATA_DIR"])
    workspace = cli(bare_env, "workspace", "create", "Found Through The Socket", "--json")
    store_pid = json.loads((data_dir / "store.json").read_text())["pid"]
    try:
        printed = run_postroom(bare_env, "store", "url")
        url = printed.stdout.strip()
        assert url == embedded_store.socket_url(data_dir) + "/postroom" and printed.stderr == ""
        with MongoClient(url, serverSelectionTimeoutMS=5000) as client:
            found = client.get_default_database().workspaces.find_one({"_id": workspace["id"]})
        assert found is not None and found["name"] == "Found Through The Socket"
    finally:
        assert embedded_store.stop_recorded(data_dir)
    assert process_gone(store_pid)
    stopped = run_postroom(bare_env, "store", "url")
    assert stopped.stdout.strip() == url and "not running" in stopped.stderr


def test_store_url_prints_a_configured_url_with_its_password_masked(bare_env):
    configured = "mongodb://app:s3cret@db1.example:27017,db2.example:27017/?authSource=admin"
    printed = run_postroom({**bare_env, "POSTROOM_MONGODB_URL": configured}, "store", "url")
    assert printed.stdout.strip() == "mongodb://app:****@db1.example:27017,db2.example:27017/?authSource=admin"
    assert "s3cret" not in printed.stdout + printed.stderr and "masked" in printed.stderr
    plain = run_postroom({**bare_env, "POSTROOM_MONGODB_URL": "mongodb://127.0.0.1:27017"}, "store", "url")
    assert plain.stdout.strip() == "mongodb://127.0.0.1:27017" and plain.stderr == ""
