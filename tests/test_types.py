"""mypy over mongo/ and pipelines/ (the settings are pyproject.toml's [tool.mypy]): the
document types of pipelines/core/documents.py and every annotation agree with the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_error_in_mongo_and_pipelines():
    # The cache in .mypy_cache (git-ignored) keeps a rerun to about a second; a cold run takes ~15 s of CPU.
    checked = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")],
                             cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, f"mypy (exit {checked.returncode}):\n{checked.stdout}{checked.stderr}"
