"""A real browser for the tests: Playwright for Python driving Debian's Chromium
(`apt-get install chromium`, which `.ci/run` does). Nothing is downloaded at test time: the
browser is the system's, and Playwright only speaks to it.

A test that cannot find the browser fails with the command that installs it, rather than
skipping: browser tests must run in CI.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = Path(os.environ.get("SGAM_TEST_CHROMIUM", "/usr/bin/chromium"))
# Headless, and nothing that reaches out: no first-run, sync, component or background fetches.
FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
SCREENSHOTS = Path(os.environ.get("SGAM_TEST_SCREENSHOTS", "build/screenshots"))


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium under Playwright, closed afterwards."""
    if not CHROMIUM.exists():
        pytest.fail(f"no browser at {CHROMIUM}: run `apt-get install -y chromium` (see .ci/run)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=list(FLAGS)
        )
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Page, name: str) -> Path:
    """Save the whole page as SCREENSHOTS/<name>.png and return the path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def sign_in(page: Page, secret: str) -> None:
    """Sign in through the form, as a person would: the field labelled `API key`, the button
    `Sign in`."""
    page.goto("/ui/sign-in")
    page.get_by_label("API key").fill(secret)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()


def csrf_of(page: Page) -> str:
    """The CSRF token the current page's forms carry (every signed-in page has the Sign out
    form)."""
    token = page.locator("input[name=csrf_token]").first.get_attribute("value")
    assert token, "the page carries no CSRF token"
    return token
