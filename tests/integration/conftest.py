"""Fixtures of the tests that talk to a running `sgam serve` (the HTTP, MCP and browser
tests): each test keeps apart from the others on the shared server by a tenant of its own.
`keys` makes its keys in the `store` its directory's conftest opens on the server's database."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from pipeline.access.keys import create_key
from pipeline.db.store import Store
from tests.integration.ledger_helpers import cli
from tests.integration.server_helpers import Keys


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


@pytest.fixture
def sgam(
    cli_env: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    """Run the CLI in-process on the test's store; returns (exit code, stdout, stderr)."""
    return lambda *args: cli(capsys, *args)
