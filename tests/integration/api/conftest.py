"""The HTTP service under test: `sgam serve` started as a separate process on a free loopback
port (`tests/integration/server_helpers.py`), on a PostgreSQL database of its own and the Redis
database SGAM_TEST_API_REDIS_URL names; tests talk to it over HTTP.

Tests share one server per xdist worker (session-scoped: each start costs seconds of CPU) and
keep apart by tenant: every test makes its own tenant (`tenant` fixture) and keys for it
(`keys`). A module that needs other settings starts its own (`start_server`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from pipeline.db.store import Store, open_store
from pipeline.settings import Settings
from tests.integration.server_helpers import (
    REDIS_URL,
    Server,
    migrated_database,
    start_server,
    stop_server,
)


@pytest.fixture(scope="session")
def api_database(postgres_url: str) -> str:
    """A migrated database of the HTTP tests' own, kept for the session: tests keep apart by
    tenant."""
    own = migrated_database(postgres_url, "http")
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    client.close()
    return own


@pytest.fixture(scope="session")
def server(api_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = start_server(api_database, tmp_path_factory.mktemp("api"))
    yield started
    stop_server(started)


@pytest.fixture(scope="module")
def store(api_database: str) -> Iterator[Store]:
    """The server's database and Redis, for making keys (revoking one announces it in the
    server's Redis) and checking what was (not) written."""
    opened = open_store(Settings(database_url=api_database, redis_url=REDIS_URL))
    yield opened
    opened.dispose()
