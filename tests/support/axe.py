"""axe-core, the accessibility checker, run in the browser on each console page. Its
package comes from the npm registry (`npm pack`, the version pinned here) into `.cache/`
— fetched by ops/test.sh, never copied into our tree; the tests read axe.min.js straight
from the tarball and inject it (the pages themselves allow no script: the page's context
is opened with its CSP bypassed, tests/support/console.new_page)."""

from __future__ import annotations

import functools
import tarfile
from pathlib import Path

AXE_VERSION = "4.14.1"
ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "axe-core"
# What the Done-when of issue #37 refuses; "moderate" and "minor" are reported, not failed on.
REFUSED_IMPACTS = ("serious", "critical")


def tarball() -> Path:
    path = CACHE / f"axe-core-{AXE_VERSION}.tgz"
    if not path.exists():
        raise RuntimeError(f"axe-core {AXE_VERSION} is missing: {path}. `bash ops/test.sh` fetches it; by hand: "
                           f"mkdir -p {CACHE} && (cd {CACHE} && npm pack axe-core@{AXE_VERSION})")
    return path


@functools.cache
def source() -> str:
    with tarfile.open(tarball()) as package:
        return package.extractfile("package/axe.min.js").read().decode()


def violations(page) -> list[dict]:
    """axe's violations on the page as it is now (WCAG 2.x A and AA rules and best practices)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=source())
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return result["violations"]


def assert_no_serious_violations(page, name: str) -> list[dict]:
    """Fails on serious or critical violations; returns the lesser ones."""
    found = violations(page)
    refused = [v for v in found if v["impact"] in REFUSED_IMPACTS]
    assert not refused, f"{name}: " + "; ".join(
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}" for v in refused)
    return found
