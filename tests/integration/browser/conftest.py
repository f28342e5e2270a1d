"""Browser tests: Debian's Chromium (`tests/integration/browser_helpers.py`) against a real
`sgam serve` on a PostgreSQL database of their own (`<test database>_ui`).

One server for the whole directory and one browser per module; every test gets a fresh
browser context (no cookies carried over), its own tenant and keys, and leaves a screenshot of
where it ended in SGAM_TEST_SCREENSHOTS (`build/screenshots`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from pipeline.db.store import Store, open_store
from pipeline.settings import Settings
from tests.integration.browser_helpers import chromium, screenshot
from tests.integration.server_helpers import (
    Server,
    migrated_database,
    start_server,
    stop_server,
)

WIDE = {"width": 1280, "height": 900}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium per test module: Playwright's sync API keeps an event loop running while
    it is open, which would break later tests that run their own (asyncio.run)."""
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="session")
def ui_database(postgres_url: str) -> str:
    return migrated_database(postgres_url, "ui")


@pytest.fixture(scope="session")
def server(ui_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = start_server(ui_database, tmp_path_factory.mktemp("ui"))
    yield started
    stop_server(started)


@pytest.fixture(scope="session")
def store(ui_database: str) -> Iterator[Store]:
    """The server's database, for making keys and setting up what the pages show."""
    opened = open_store(Settings(database_url=ui_database))
    yield opened
    opened.dispose()


@pytest.fixture
def page(browser: Browser, server: Server, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page in a fresh context, 1280 px wide, whose relative URLs go to the server."""
    context = browser.new_context(base_url=server.url, viewport=WIDE)
    opened = context.new_page()
    yield opened
    screenshot(opened, f"{request.node.name}-end")
    context.close()
