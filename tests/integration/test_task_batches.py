"""How many episodes a worker task takes (SGAM_WORKER_BATCH): unset, 128 with the rules and 32
with a model, so the wake-ups the intake puts on the broker are sized by the workers' lane."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.db.store import open_store
from pipeline.episodes.drive import drive
from tests.factories import isolated_settings
from tests.integration.celery_helpers import REDIS_URL, flush_redis

pytestmark = pytest.mark.celery

KEYS = [("t1", f"e{number}") for number in range(300)]


@pytest.fixture
def broker() -> Iterator[str]:
    flush_redis()
    yield REDIS_URL
    flush_redis()  # no worker takes these wake-ups


@pytest.mark.parametrize(
    ("lane", "sent"),
    [
        ({}, 3),  # the rules: 128, 128, 44
        ({"llm_base_url": "http://127.0.0.1:9/v1"}, 10),  # a model: 32 a task
        ({"worker_batch": 50}, 6),  # set, whatever the lane
        ({"worker_batch": 50, "llm_base_url": "http://127.0.0.1:9/v1"}, 6),
    ],
)
def test_the_wake_ups_are_sized_by_the_lane(
    database_url: str, broker: str, lane: dict[str, Any], sent: int
) -> None:
    store = open_store(isolated_settings(database_url=database_url, broker_url=broker, **lane))
    try:
        assert drive(store, KEYS).sent == sent
    finally:
        store.dispose()
