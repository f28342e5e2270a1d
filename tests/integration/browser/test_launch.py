"""The browser setup itself: Debian's Chromium starts under Playwright and loads a page of a
real `sgam serve` (the other browser tests build on this)."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page

from tests.integration.browser_helpers import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.postgres]


def test_chromium_loads_a_page_of_the_server(page: Page) -> None:
    response = page.goto("/healthz")
    assert response is not None
    assert response.status == 200
    assert json.loads(page.locator("body").inner_text())["status"] == "ok"
    assert screenshot(page, "launch-healthz").stat().st_size > 0
