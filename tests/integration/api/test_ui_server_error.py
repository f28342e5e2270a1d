"""A review page that fails on the server (500) still answers as a page should: the page's
security headers, no caching, a plain sentence and nothing of the failure. The failure is
real, not mocked: a `sgam serve` on a SQLite database of the test's own, whose candidates
table is dropped under it (a 500 is answered outside every middleware, by the handler of
Starlette's ServerErrorMiddleware, so only a real failure exercises that path)."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.access.keys import create_key
from pipeline.db.store import Store, open_store
from pipeline.settings import Settings
from tests.integration.api.ui_helpers import signed_in
from tests.integration.server_helpers import Server, start_server, stop_server

SECURITY = ("content-security-policy", "x-frame-options", "x-content-type-options")


@pytest.fixture
def broken(tmp_path: Path) -> Iterator[tuple[Server, str, Path]]:
    """A server on a fresh SQLite database, a reviewer's key, and the database's file."""
    database = tmp_path / "broken.sqlite3"
    url = f"sqlite:///{database}"
    migrating = Store(Settings(database_url=url))
    migrating.upgrade()
    migrating.dispose()
    store = open_store(Settings(database_url=url))
    tenant = f"broken-{random.randrange(10**9)}"
    _, secret = create_key(store, {"tenant_id": tenant, "role": "reviewer"})
    store.dispose()
    server = start_server(url, tmp_path)
    yield server, secret, database
    stop_server(server)


def test_the_500_page_carries_the_security_headers(broken: tuple[Server, str, Path]) -> None:
    server, secret, database = broken
    with signed_in(server, secret) as browser:
        before = browser.get("/ui/candidates")
        with sqlite3.connect(database) as connection:
            connection.execute("DROP TABLE candidate_support")
            connection.execute("DROP TABLE candidates")
        failed = browser.get("/ui/candidates")

    assert before.status_code == 200, before.text[:500]
    assert failed.status_code == 500, failed.text[:500]
    assert all(name in failed.headers for name in SECURITY), failed.headers
    assert failed.headers["cache-control"] == "no-store"
    assert failed.headers["content-type"].startswith("text/html")
    assert "Something went wrong on the server." in failed.text
    shown = failed.text.lower()  # nothing of the failure: no SQL, table or traceback
    assert all(word not in shown for word in ("no such table", "sqlite", "select", "traceback"))
