"""`postroom up` stopped with SIGTERM right after accepting a batch, then started again:
the accepted mail still waiting is picked up at start (ops/scheduler.pick_up_accepted),
not after the watchdog's stall timeout (POSTROOM_MESSAGE_STALL_SECONDS, 10 min by
default): every message of the batch reaches the capture outbox, once, within 30 s of
the restart. With no POSTROOM_AMQP_URL, `up` runs the in-process broker, whose jobs all
go with the process."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.ops.test_up import bare_env, cli, start_up, stop_with  # noqa: F401 (bare_env: a fixture)

pytestmark = pytest.mark.e2e  # `postroom up` processes of its own

BATCH = 300
PICKUP_SECONDS = 30


def _captured(outbox: Path, message_ids: set[str]) -> set[str]:
    if not outbox.exists():
        return set()
    return {p.stem for p in outbox.glob("*.eml")} & message_ids


@pytest.mark.slow
def test_up_restarted_after_sigterm_delivers_the_accepted_batch_within_30_s(bare_env, tmp_path):  # noqa: F811 (the fixture)
    data_dir = Path(bare_env["POSTROOM_DATA_DIR"])
    outbox = data_dir / "outbox"
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    up, base_url = start_up(bare_env, log_dir, "up-accepting")
    workspace = cli(bare_env, "workspace", "create", "Restart", "--from-email", "me@restart.example", "--json")
    key = cli(bare_env, "key", "create", "--workspace", workspace["id"], "--email-rate-limit", "10000",
              "--json")["key"]
    with httpx.Client(base_url=base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
        accepted = api.post("/email/batch", json={"messages": [
            {"to": f"r{i:04d}@example.org", "subject": f"Receipt {i}", "text": "Thanks"} for i in range(BATCH)]},
            headers={"Idempotency-Key": uuid.uuid4().hex})
    assert accepted.status_code == 202, accepted.text
    message_ids = set(accepted.json()["data"]["message_ids"])
    assert len(message_ids) == BATCH

    assert stop_with(up, signal.SIGTERM) == 0, up.tail()
    left = message_ids - _captured(outbox, message_ids)
    assert left, "the whole batch went out before the stop: nothing left to pick up (stop sooner)"

    again, base_url = start_up(bare_env, log_dir, "up-restarted")
    started = time.monotonic()
    try:
        while _captured(outbox, message_ids) != message_ids and time.monotonic() - started < PICKUP_SECONDS:
            time.sleep(0.2)
        missing = message_ids - _captured(outbox, message_ids)
        assert not missing, (f"{len(missing)} of the {len(left)} messages left at the stop still not delivered "
                             f"{PICKUP_SECONDS} s after the restart\n{again.tail()}")
        took = time.monotonic() - started
        with httpx.Client(base_url=base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"},
                          timeout=60) as api:
            for mid in sorted(left)[:20]:  # once each: one `sent` in its history
                history = api.get(f"/email/{mid}/status").json()["data"].get("history") or []
                assert [h["status"] for h in history].count("sent") <= 1, history
    finally:
        assert stop_with(again, signal.SIGTERM) == 0, again.tail()
    print(f"{len(left)} messages left at the stop, all delivered {took:.1f} s after the restart")
