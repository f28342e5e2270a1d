"""`sgam worker --metrics-port` with two pool processes on the rules lane: the endpoint serves
the sum of what each process counted (read back from each process's own file), episodes by
lane and outcome, the extraction's latency, the decisions by action, and the gauges read when
scraped (the buffer's size, the broker's queue depth) — all checked against the database and
the broker."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import redis
from celery import Celery as CeleryApp
from prometheus_client.mmap_dict import MmapedDict

import pipeline
from pipeline.db.store import open_store
from pipeline.episodes.dispatch import CONSOLIDATE_QUEUE, SWEEP_TASK
from pipeline.settings import Settings
from tests.databases import empty_database
from tests.integration.celery_helpers import (
    REDIS_URL,
    Celery,
    count,
    die_with_the_test_process,
    episode_counts,
    flush_redis,
    scrape_metrics,
    wait_for,
    worker_env,
)
from tests.integration.server_helpers import SGAM, free_port, migrated_database

pytestmark = [pytest.mark.postgres, pytest.mark.celery, pytest.mark.slow]

# Each sentence's decision on the background lane, with the support catalogue.
SENTENCES = {
    "My birthday is 1990-05-04.": "quarantined",  # sensitive
    "I prefer concise answers.": "buffered",  # waits for a second session
    "My account plan is pro.": "written",
    "My home city is Utrecht.": "written",
}


def _per_process(directory: Path, metric: str) -> dict[str, float]:
    """What each pool process counted of `metric`, from its own multiprocess file."""
    counted: dict[str, float] = defaultdict(float)
    for path in directory.glob("counter_*.db"):
        for key, value, _, _ in MmapedDict.read_all_values_from_file(str(path)):
            if json.loads(key)[1] == metric:
                counted[path.stem] += value
    return dict(counted)


def test_a_two_process_worker_serves_the_sum_of_its_processes_and_the_gauges(
    postgres_url: str, tmp_path: Path
) -> None:
    database = migrated_database(postgres_url, "worker_metrics")
    empty_database(database)
    flush_redis()
    producer = open_store(Settings(database_url=database, broker_url=REDIS_URL, worker_batch=1))
    texts = list(SENTENCES)
    total = 12
    try:  # queued before the worker starts, one message each: both processes find work
        pipeline.ingest(
            producer,
            [
                {
                    "tenant_id": "acme",
                    "subject": f"user-{n}",
                    "session_id": f"s{n}",
                    "occurred_at": "2026-06-01T09:00:00Z",
                    "text": texts[n % len(texts)],
                }
                for n in range(total)
            ],
        )
    finally:
        producer.dispose()
    directory = tmp_path / "metrics"
    directory.mkdir()
    env = worker_env(database, PROMETHEUS_MULTIPROC_DIR=str(directory), SGAM_WORKER_BATCH="1")
    celery = Celery(env, tmp_path)
    port = free_port()
    command = [SGAM, "worker", "--queues", "extract", "--concurrency", "2"]
    command += ["--metrics-port", str(port)]
    with open(tmp_path / "celery-sgam.log", "wb") as log:
        celery.processes.append(
            subprocess.Popen(
                command,
                env=env,
                cwd=tmp_path,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_the_test_process,
            )
        )
    try:
        wait_for(
            lambda: episode_counts(database).get("done", 0) == total,
            60,
            f"{total} episodes done",
            celery.logs,
        )
        # Three wake-ups on a queue this worker does not take: the depth it must report.
        sender = CeleryApp(broker=REDIS_URL)
        for _ in range(3):
            sender.send_task(SWEEP_TASK, queue=CONSOLIDATE_QUEUE)
        sender.close()
        scraped = scrape_metrics(port, celery)
    finally:
        celery.stop()

    done = 'sgam_episodes_processed_total{lane="background",outcome="done"}'
    assert scraped[done] == total
    counted = _per_process(directory, "sgam_episodes_processed_total")
    assert len(counted) == 2, f"one process did all the work: {counted}"
    assert all(value > 0 for value in counted.values())
    assert sum(counted.values()) == scraped[done]

    assert scraped['sgam_extraction_duration_seconds_count{extractor="rules"}'] == total
    assert scraped['sgam_extraction_duration_seconds_sum{extractor="rules"}'] > 0
    expected: dict[str, int] = defaultdict(int)
    for n in range(total):
        expected[SENTENCES[texts[n % len(texts)]]] += 1
    decided = {
        action: scraped.get(f'sgam_decisions_total{{action="{action}",lane="background"}}', 0)
        for action in expected
    }
    assert decided == expected
    assert sum(_per_process(directory, "sgam_decisions_total").values()) == total

    buffered = count(database, "SELECT count(*) FROM candidates WHERE status = 'buffered'")
    assert scraped["sgam_buffer_candidates"] == buffered == expected["buffered"]
    client = redis.Redis.from_url(REDIS_URL)
    try:
        assert scraped['sgam_queue_depth{queue="consolidate"}'] == 3
        assert client.llen(CONSOLIDATE_QUEUE) == 3
        assert scraped['sgam_queue_depth{queue="extract"}'] == 0
    finally:
        client.close()
