"""ops/config.py: the generated secret key is created once, owner-only, even when several
processes start on a fresh data dir at the same moment."""

import multiprocessing
import stat
from pathlib import Path

import pytest

from ops.config import secret_key_for
from pipelines.core.settings import Settings

PROCESSES = 6


def _key_in_child(data_dir: str, start, results) -> None:
    start.wait()
    results.put(secret_key_for(Settings(data_dir=Path(data_dir), secret_key="")))


@pytest.mark.e2e  # processes of its own
def test_processes_starting_together_on_a_fresh_data_dir_agree_on_one_owner_only_key(tmp_path):
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    children = [context.Process(target=_key_in_child, args=(str(tmp_path), start, results))
                for _ in range(PROCESSES)]
    for child in children:
        child.start()
    start.set()
    keys = {results.get(timeout=60) for _ in children}
    for child in children:
        child.join(timeout=30)
    assert len(keys) == 1 and len(keys.pop()) >= 48
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600


def test_a_configured_secret_key_wins_and_writes_nothing(tmp_path):
    assert secret_key_for(Settings(data_dir=tmp_path, secret_key="configured")) == "configured"
    assert not (tmp_path / "secret_key").exists()
