"""Every test here is end to end (`e2e`: processes, mail, events). What the browser tests
of recipient-facing pages share: one headless Chromium per module (the Debian package
ops/test.sh installs), no JavaScript needed by the pages."""

from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    for item in items:  # the hook sees the whole session's items
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
