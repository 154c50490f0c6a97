"""The console's tests: the session's real front (and worker, scheduler) and one headless
Chromium per module (tests/e2e/conftest.py). Screenshots go to POSTROOM_TEST_SCREENSHOTS
when it is set (to keep them), else under the run's directory."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def screenshot_dir(run_dir):
    return Path(os.environ.get("POSTROOM_TEST_SCREENSHOTS") or run_dir / "console-screenshots")
