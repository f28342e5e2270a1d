"""GET /v1/usage: what the model lane spent for the admin's tenant, as `pipeline.llm_usage`
answers it; other roles and bound keys may not read it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import pipeline
from pipeline.db.store import open_store
from pipeline.settings import Settings
from tests.integration.server_helpers import REDIS_URL, Keys, Server
from tests.integration.stub_llm import StubServer


@pytest.fixture
def stub() -> Iterator[Any]:
    with StubServer() as server:
        yield server


def test_an_admin_reads_its_tenants_usage(
    server: Server, keys: Keys, tenant: str, api_database: str, stub: Any
) -> None:
    # The episodes are read by the model in a process of their own (inline mode), into the
    # server's database: the server itself has no model.
    model = open_store(
        Settings(database_url=api_database, llm_base_url=stub.base_url, llm_model="stub")
    )
    try:
        lines = [
            {
                "tenant_id": tenant,
                "subject": "mira",
                "session_id": "s1",
                "occurred_at": "2026-06-01T09:00:00Z",
                "text": f"Turn {n}: lovely view.",
            }
            for n in range(3)
        ]
        pipeline.ingest(model, lines)
        expected = pipeline.llm_usage(model, {"tenant_id": tenant}).model_dump(mode="json")
    finally:
        model.dispose()
    with server.client(keys("admin")) as api:
        answered = api.get("/v1/usage")
        later = api.get("/v1/usage", params={"since": "2999-01-01T00:00:00Z"})
    with server.client(keys("reviewer")) as api:
        refused = api.get("/v1/usage")
    assert answered.status_code == 200
    assert answered.json() == expected
    ((row,),) = [answered.json()["rows"]]
    assert (row["tenant_id"], row["model"], row["requests"], row["cost"]) == (
        tenant,
        "stub",
        3,
        None,
    )
    assert later.json() == {"rows": [], "total_cost": None}
    assert refused.status_code == 403


def test_episodes_waiting_for_a_worker_count_for_nothing(
    server: Server, keys: Keys, tenant: str, api_database: str
) -> None:
    # Queued for workers that never come: stored with no usage yet (JSON null in the column).
    queued = open_store(Settings(database_url=api_database, broker_url=REDIS_URL))
    try:
        pipeline.ingest(
            queued,
            {
                "tenant_id": tenant,
                "subject": "mira",
                "session_id": "s1",
                "occurred_at": "2026-06-01T09:00:00Z",
                "text": "my plan is pro",
            },
        )
    finally:
        queued.dispose()
    with server.client(keys("admin")) as api:
        answered = api.get("/v1/usage")

    assert answered.status_code == 200, answered.text
    assert answered.json() == {"rows": [], "total_cost": None}
