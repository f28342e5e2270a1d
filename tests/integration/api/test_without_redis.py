"""The HTTP service without Redis (SGAM_REDIS_URL unset or empty): each server process keeps
its own rate limits, so requests are answered and the limit still holds — never a 503 on every
request, and readiness does not wait for a Redis no one named."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.access.keys import create_key
from pipeline.db.store import Store
from tests.integration.server_helpers import start_server, stop_server

pytestmark = pytest.mark.postgres


def test_a_service_without_redis_limits_each_key_in_its_own_process(
    api_database: str, tmp_path: Path, store: Store, tenant: str
) -> None:
    # One token a minute after a burst of 3: however slow the machine, the 4th request waits.
    alone = start_server(
        api_database,
        tmp_path,
        SGAM_REDIS_URL="",
        SGAM_API_RATE_PER_S=str(1 / 60),
        SGAM_API_RATE_BURST="3",
    )
    try:
        secret = create_key(store, {"tenant_id": tenant, "role": "reader"})[1]
        other = create_key(store, {"tenant_id": tenant, "role": "reader"})[1]
        with alone.client(secret) as api:
            statuses = [api.get("/v1/subjects/mira/facts").status_code for _ in range(5)]
            refused = api.get("/v1/subjects/mira/facts")
        with alone.client(other) as api:
            fresh = api.get("/v1/subjects/mira/facts").status_code
        with alone.client() as anyone:
            ready = anyone.get("/readyz")
    finally:
        stop_server(alone)

    assert statuses == [200, 200, 200, 429, 429]  # the burst, then the limit
    assert refused.json()["type"] == "urn:sgam:problem:rate-limited"
    assert int(refused.headers["Retry-After"]) >= 1
    assert fresh == 200  # another key has its own bucket
    assert ready.status_code == 200
    assert "rate_limit_redis" not in ready.json()["checks"]
