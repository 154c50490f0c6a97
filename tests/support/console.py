"""What the console's browser and HTTP tests share: signing in (through the form, as a
person does), the CSRF token of a page's form, and screenshots at desktop and phone width."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.support import axe

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    return _CSRF.search(html).group(1)


def signed_in_client(service, key: str) -> httpx.Client:
    """An HTTP client holding a console session of `key` (its cookies kept by the client)."""
    client = httpx.Client(base_url=service.base_url, timeout=30)
    form = client.get("/console/sign-in")
    answer = client.post("/console/sign-in", data={"csrf": csrf_of(form.text), "key": key})
    assert answer.status_code == 303 and answer.headers["location"] == "/console", answer.text
    return client


def sign_in(page, service, key: str) -> None:
    """Through the sign-in form in the browser, with the keyboard."""
    page.goto(service.base_url + "/console/sign-in")
    page.get_by_label("API key").fill(key)
    page.keyboard.press("Enter")
    page.wait_for_url(service.base_url + "/console")


def new_page(browser):
    """A browser tab whose pages' CSP is bypassed, so axe-core can be injected (the
    console's own pages run no script)."""
    return browser.new_context(bypass_csp=True, viewport=DESKTOP).new_page()


def screenshots(page, directory: Path, name: str) -> list[Path]:
    """The page as it is now, at desktop and at phone width (the page is loaded again at
    each width), checked by axe-core at each (no serious or critical violation); the
    files written. At phone width nothing is wider than the screen. The server's time for
    each load (its Server-Timing) is noted in server-timing.txt beside them: a record,
    not a check (times are measured in bench/, not asserted in tests)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        response = page.reload()
        with (directory / "server-timing.txt").open("a") as timings:
            timings.write(f"{name}-{label}\t{response.headers.get('server-timing', '-')}\n")
        if label == "phone":
            overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{name}: {overflow}px wider than a {size['width']}px screen"
        axe.assert_no_serious_violations(page, f"{name} at {label} width")
        path = directory / f"{name}-{label}.png"
        page.screenshot(path=str(path), full_page=True)
        written.append(path)
    page.set_viewport_size(DESKTOP)
    return written


def go_to(page, name: str) -> None:
    """Follow the console's navigation link `name`."""
    page.get_by_role("navigation", name="Console").get_by_role("link", name=name).click()
    page.wait_for_load_state()
