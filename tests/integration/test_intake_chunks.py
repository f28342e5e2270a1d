"""An intake is stored in transactions that start at one worker task's batch and double up to
SGAM_INGEST_CHUNK, so the workers can start on the first while the rest is stored."""

from __future__ import annotations

from typing import Any

import pytest

import pipeline
from pipeline.db.store import open_store
from pipeline.episodes.intake import chunk_bounds
from tests.factories import isolated_settings


def _episodes(count: int) -> list[dict[str, Any]]:
    return [
        {
            "tenant_id": "t1",
            "subject": "mira",
            "session_id": "s1",
            "episode_id": f"e{number}",
            "occurred_at": "2026-06-01T10:00:00Z",
            "text": f"Small talk number {number}.",
        }
        for number in range(count)
    ]


@pytest.mark.parametrize(
    ("lane", "sizes"),
    [
        ({}, [128, 256, 300, 300, 16]),  # the rules' batch first
        ({"worker_batch": 50}, [50, 100, 200, 300, 300, 50]),
    ],
)
def test_the_chunks_grow_from_a_batch_to_the_setting(
    database_url: str, lane: dict[str, Any], sizes: list[int]
) -> None:
    settings = isolated_settings(database_url=database_url, ingest_chunk=300, **lane)
    store = open_store(settings)
    stored: list[int] = []
    try:
        report = pipeline.ingest(store, _episodes(1000), progress=stored.append)
    finally:
        store.dispose()
    assert stored == sizes
    assert [receipt.episode_id for receipt in report.receipts] == [f"e{n}" for n in range(1000)]
    assert {receipt.status for receipt in report.receipts} == {"done"}


def test_the_bounds_cover_every_episode_once() -> None:
    for count in (0, 1, 127, 128, 129, 5882):
        bounds = chunk_bounds(count, 128, 1000)
        covered = [n for start, end in bounds for n in range(start, end)]
        assert covered == list(range(count))
        assert all(end - start <= 1000 for start, end in bounds)
    assert chunk_bounds(10, 128, 4) == [(0, 4), (4, 8), (8, 10)]  # never above the setting
