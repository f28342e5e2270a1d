"""The pipeline with real parts: Celery worker and beat as separate processes on the local
Redis, PostgreSQL as the store, and real faults — a duplicated message, a worker killed with
SIGKILL in the middle of its batches, and Redis flushed while episodes wait in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import pipeline
from pipeline.db.store import Store, open_store
from pipeline.episodes.dispatch import send_extract
from pipeline.settings import Settings
from tests.databases import empty_database
from tests.integration.celery_helpers import (
    REDIS_URL,
    Celery,
    celery_database_url,
    count,
    episode_counts,
    flush_redis,
    wait_for,
    wait_for_done,
    worker_env,
)
from tests.integration.pipeline_helpers import TENANT

pytestmark = [pytest.mark.postgres, pytest.mark.celery, pytest.mark.slow]

CITIES = ["Lisbon", "Porto", "Oslo", "Rome", "Lima", "Quito", "Hanoi", "Perth"]


@pytest.fixture(scope="module")
def celery_url(postgres_url: str) -> str:
    """A database of its own: the workers keep connections open across tests."""
    from tests.databases import create_database

    url = celery_database_url(postgres_url)
    create_database(url)
    migrated = Store(Settings(database_url=url))
    migrated.upgrade()
    migrated.dispose()
    return url


@pytest.fixture
def producer(celery_url: str) -> Iterator[Store]:
    """The chat backend's side: a store that queues on the broker."""
    empty_database(celery_url)
    flush_redis()
    store = open_store(Settings(database_url=celery_url, broker_url=REDIS_URL, worker_batch=25))
    yield store
    store.dispose()


@pytest.fixture
def celery(celery_url: str, tmp_path: Path) -> Iterator[Celery]:
    processes = Celery(worker_env(celery_url), tmp_path)
    yield processes
    processes.stop()


def _episodes(count: int, offset: int = 0) -> list[dict[str, object]]:
    """Episodes of many subjects; every fourth states a home city (a fact), the rest chat."""
    lines = []
    for n in range(offset, offset + count):
        text = (
            f"My home city is {CITIES[n % len(CITIES)]}."
            if n % 4 == 0
            else f"Turn {n}: fine, thanks."
        )
        lines.append(
            {
                "tenant_id": TENANT,
                "subject": f"user-{n % 50}",
                "session_id": f"s{n // 10}",
                "occurred_at": f"2026-06-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
                "text": text,
            }
        )
    return lines


def _all_done(url: str, total: int, celery: Celery) -> None:
    # The sweeper hands stranded episodes back once their 10 s lease runs out.
    wait_for_done(url, total, 60, celery.logs)


def _no_duplicates(url: str) -> None:
    """Each episode wrote its fact once and was recorded once, however often it was handled."""
    assert count(url, "SELECT count(*) FROM episodes WHERE attempts < 1") == 0
    per_episode = (
        "SELECT max(n) FROM (SELECT count(*) AS n FROM events WHERE kind = '{}' "
        "GROUP BY episode_id) x"
    )
    assert count(url, per_episode.format("episode_processed")) == 1
    assert count(url, per_episode.format("write")) == 1
    assert count(url, "SELECT count(*) FROM claims") == count(
        url, "SELECT count(DISTINCT source_episode_id) FROM claims"
    )


def test_workers_process_what_was_ingested(
    producer: Store, celery: Celery, celery_url: str
) -> None:
    celery.worker()
    report = pipeline.ingest(producer, _episodes(200))

    assert {r.status for r in report.receipts} == {"queued"}
    _all_done(celery_url, 200, celery)
    _no_duplicates(celery_url)
    assert count(celery_url, "SELECT count(DISTINCT source_episode_id) FROM facts") == 50
    (fact,) = pipeline.get(
        producer, {"tenant_id": TENANT, "subject": "user-0", "attribute": "home_city"}
    )
    assert fact.source_episode_id in {r.episode_id for r in report.receipts}


def test_a_duplicated_message_and_a_second_ingest_change_nothing(
    producer: Store, celery: Celery, celery_url: str
) -> None:
    lines = _episodes(40)
    first = pipeline.ingest(producer, lines)
    keys = [(TENANT, r.episode_id) for r in first.receipts]
    send_extract(REDIS_URL, keys, 25)  # the same wake-ups again
    celery.worker()
    _all_done(celery_url, 40, celery)
    events = count(celery_url, "SELECT count(*) FROM events")

    again = pipeline.ingest(
        producer,
        [
            line | {"episode_id": r.episode_id}
            for line, r in zip(lines, first.receipts, strict=True)
        ],
    )
    send_extract(REDIS_URL, keys, 25)

    assert {r.status for r in again.receipts} == {"duplicate"}
    _no_duplicates(celery_url)
    wait_for(
        lambda: "succeeded" in celery.logs().split("extract_episodes[")[-1],
        30,
        "the repeated task",
        celery.logs,
    )
    assert count(celery_url, "SELECT count(*) FROM events") == events


def test_a_worker_killed_mid_batch_loses_nothing_and_duplicates_nothing(
    producer: Store, celery: Celery, celery_url: str
) -> None:
    total = 3000
    pipeline.ingest(producer, _episodes(total))
    worker = celery.worker()
    wait_for(
        lambda: episode_counts(celery_url).get("done", 0) >= 100,
        60,
        "the first episodes",
        celery.logs,
    )

    celery.kill(worker)

    done_at_kill = episode_counts(celery_url).get("done", 0)
    assert done_at_kill < total, "the worker finished before it was killed: ingest more"
    celery.worker()
    celery.beat()  # the sweeper gives stranded episodes back once their lease runs out
    _all_done(celery_url, total, celery)
    _no_duplicates(celery_url)


def test_episodes_lost_by_the_broker_are_swept_back(
    producer: Store, celery: Celery, celery_url: str
) -> None:
    pipeline.ingest(producer, _episodes(300))
    assert episode_counts(celery_url) == {"pending": 300}

    flush_redis()  # the broker loses every message (it keeps nothing on disk)
    celery.worker()
    celery.beat()

    _all_done(celery_url, 300, celery)
    _no_duplicates(celery_url)
