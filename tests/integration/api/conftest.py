"""The HTTP service under test: `sgam serve` started as a separate process on a free loopback
port (`tests/integration/server_helpers.py`), on a PostgreSQL database of its own and the Redis
database SGAM_TEST_API_REDIS_URL names; tests talk to it over HTTP.

Tests share one server per module and keep apart by tenant: every test makes its own tenant
(`tenant` fixture) and keys for it (`keys`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from pipeline.access.keys import create_key
from pipeline.db.store import Store, open_store
from pipeline.settings import Settings
from tests.integration.server_helpers import (
    REDIS_URL,
    Keys,
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


@pytest.fixture(scope="module")
def server(api_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = start_server(api_database, tmp_path_factory.mktemp("api"))
    yield started
    stop_server(started)


@pytest.fixture(scope="module")
def store(api_database: str) -> Iterator[Store]:
    """The server's database, for making keys and checking what was (not) written."""
    opened = open_store(Settings(database_url=api_database))
    yield opened
    opened.dispose()


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def keys(store: Store, tenant: str) -> Keys:
    """`keys("writer")`: the secret of a new key of the test's tenant with that role."""

    def make(role: str, **options: Any) -> str:
        fields = {"tenant_id": options.pop("tenant_id", tenant), "role": role} | options
        return create_key(store, fields)[1]

    return make
