"""The model lane with real Celery workers on PostgreSQL and the local Redis, against the stub
OpenAI-compatible server (tests/integration/stub_llm.py): a model slower than the lease fails
no episode, the workers share one budget for the endpoint, and a 429 pauses all of them."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

import pipeline
from pipeline.db.store import Store, open_store
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
from tests.integration.pipeline_helpers import TENANT
from tests.integration.server_helpers import free_port, migrated_database
from tests.integration.stub_llm import StubServer

pytestmark = [pytest.mark.postgres, pytest.mark.celery, pytest.mark.slow]


@pytest.fixture(scope="module")
def lane_url(postgres_url: str) -> str:
    return migrated_database(postgres_url, "llm_lane")


@pytest.fixture
def stub() -> Iterator[Any]:
    with StubServer() as server:
        yield server


@pytest.fixture
def producer(lane_url: str) -> Iterator[Store]:
    empty_database(lane_url)
    flush_redis()
    store = open_store(Settings(database_url=lane_url, broker_url=REDIS_URL, worker_batch=8))
    yield store
    store.dispose()


def _workers(lane_url: str, stub: Any, tmp_path: Path, **settings: str) -> Celery:
    env = worker_env(
        lane_url,
        SGAM_LLM_BASE_URL=stub.base_url,
        SGAM_LLM_MODEL="stub",
        SGAM_REDIS_URL=REDIS_URL,
        **{"SGAM_WORKER_BATCH": "8", **settings},
    )
    return Celery(env, tmp_path)


def _lines(total: int) -> list[dict[str, object]]:
    return [
        {
            "tenant_id": TENANT,
            "subject": f"user-{n % 5}",
            "session_id": f"s{n}",
            "occurred_at": "2026-06-01T09:00:00Z",
            "text": f"Turn {n}: the view from the flat is lovely.",
        }
        for n in range(total)
    ]


def _run(celery: Celery, producer: Store, lane_url: str, total: int, timeout: float) -> float:
    started = time.monotonic()
    pipeline.ingest(producer, _lines(total))
    wait_for(
        lambda: episode_counts(lane_url).get("done", 0) == total,
        timeout,
        f"{total} episodes done",
        celery.logs,
    )
    return time.monotonic() - started


def test_a_model_slower_than_the_lease_fails_no_episode(
    producer: Store, stub: Any, lane_url: str, tmp_path: Path
) -> None:
    # A 10 s lease, the sweeper every second, a model answering after 14 s: without renewal
    # the sweeper hands every claim to another worker, whose fencing drops the answers.
    # One batch, so the second worker process is free to take what the sweeper re-queues.
    stub.app.configure(latency_s=14.0)
    celery = _workers(lane_url, stub, tmp_path)
    try:
        celery.worker(concurrency=2)
        celery.beat()
        _run(celery, producer, lane_url, 6, timeout=90)
    finally:
        celery.stop()
    assert episode_counts(lane_url) == {"done": 6}
    assert count(lane_url, "SELECT max(attempts) FROM episodes") == 1
    assert stub.stats.answered == 6, "every episode asked once: no claim was taken away"


def test_workers_share_one_budget_for_the_endpoint(
    producer: Store, stub: Any, lane_url: str, tmp_path: Path
) -> None:
    # Two processes and 120 requests a minute between them: after the first second's burst
    # the endpoint sees two requests a second. A process holds at most its calls and one batch
    # (4 + 8 episodes), so the second process takes the rest of the 16 and both spend the
    # budget: with a budget of its own each, the 16 requests would come in about 5 s.
    celery = _workers(lane_url, stub, tmp_path, SGAM_LLM_RPM="120", SGAM_LLM_CONCURRENCY="4")
    try:
        celery.worker(concurrency=2)
        _run(celery, producer, lane_url, 16, timeout=60)
    finally:
        celery.stop()
    stats = stub.stats
    assert episode_counts(lane_url) == {"done": 16}
    assert (stats.answered, stats.rejected) == (16, 0)
    spread = stats.arrivals[-1] - stats.arrivals[0]
    assert spread >= (16 - 2) / 2 * 0.9, f"16 requests within {spread:.1f} s"


def test_a_429_pauses_every_worker_and_fails_no_episode(
    producer: Store, stub: Any, lane_url: str, tmp_path: Path
) -> None:
    # The endpoint answers its first request 429 "retry after 3 s". Episodes ingested half a
    # second later, by whichever worker process takes them, wait out that pause.
    stub.app.configure(refuse_first=1, retry_after_s=3.0)
    celery = _workers(lane_url, stub, tmp_path, SGAM_WORKER_BATCH="1")
    try:
        celery.worker(concurrency=2)
        pipeline.ingest(producer, _lines(1))
        wait_for(lambda: stub.stats.rejected == 1, 30, "the first 429", celery.logs)
        time.sleep(0.5)
        pipeline.ingest(producer, _lines(7)[1:])
        wait_for(lambda: episode_counts(lane_url).get("done", 0) == 7, 60, "7 done", celery.logs)
    finally:
        celery.stop()
    stats = stub.stats
    assert episode_counts(lane_url) == {"done": 7}
    assert (stats.answered, stats.rejected, stats.requests) == (7, 1, 8)
    ((refused_at, pause),) = stats.refusals
    early = [at - refused_at for at in stats.arrivals[1:] if at < refused_at + pause - 0.1]
    assert early == [], "requests sent while the endpoint was paused"


def test_sgam_worker_serves_the_lanes_metrics_summed_over_its_processes(
    producer: Store, stub: Any, lane_url: str, tmp_path: Path
) -> None:
    # The tenant label is opt-in (it lists every tenant to whoever scrapes).
    celery = _workers(
        lane_url, stub, tmp_path, SGAM_WORKER_BATCH="3", SGAM_METRICS_TENANT_LABEL="1"
    )
    port = free_port()
    env = {key: value for key, value in celery.env.items() if key != "PROMETHEUS_MULTIPROC_DIR"}
    sgam = str(Path(sys.executable).parent / "sgam")
    command = [sgam, "worker", "--queues", "extract", "--concurrency", "2"]
    command += ["--metrics-port", str(port), "--loglevel", "info"]
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
        _run(celery, producer, lane_url, 12, timeout=60)
        scraped = scrape_metrics(port, celery)
    finally:
        celery.stop()
    # Four batches of three over two pool processes: the sum is every process's count.
    assert scraped['sgam_llm_requests_total{model="stub",outcome="ok"}'] == 12
    assert scraped['sgam_episodes_processed_total{lane="background",outcome="done"}'] == 12
    assert scraped['sgam_llm_request_duration_seconds_count{model="stub"}'] == 12
    assert scraped['sgam_extraction_duration_seconds_count{extractor="llm"}'] == 12
    prompt = scraped[f'sgam_llm_tokens_total{{kind="prompt",model="stub",tenant="{TENANT}"}}']
    assert prompt == count(
        lane_url, "SELECT sum(CAST(usage->>'prompt_tokens' AS integer)) FROM episodes"
    )


def _home_city(_request: dict[str, Any]) -> dict[str, Any]:
    update = {"evidence": "my home city is Lisbon", "subject": "user-0", "attribute": "home_city"}
    update |= {"current_value": None, "change": "new", "value": "Lisbon", "valid_from": None}
    return {"updates": [update]}


def test_a_worker_killed_between_the_answer_and_its_commit_leaves_the_spend_counted(
    producer: Store, stub: Any, lane_url: str, tmp_path: Path
) -> None:
    # The answer writes a fact; the decision log is locked, so the worker's commit waits
    # there, after the answer is in, until the worker is killed. Its spend must already be in
    # the usage report, and the re-driven attempt is counted beside it, not instead of it.
    stub.app.answer = _home_city
    line = _lines(1)[0] | {"subject": "user-0", "text": "Hello, my home city is Lisbon."}
    celery = _workers(lane_url, stub, tmp_path, SGAM_EPISODE_LEASE_S="10")
    engine = create_engine(lane_url)
    blocker = engine.connect()
    try:
        blocker.execute(text("LOCK TABLE events IN EXCLUSIVE MODE"))  # writes wait, reads pass
        worker = celery.worker(concurrency=1)
        pipeline.ingest(producer, [line])
        spent = "SELECT count(*) FROM episodes WHERE usage->>'model' IS NOT NULL"
        wait_for(lambda: count(lane_url, spent) == 1, 30, "the spend recorded", celery.logs)
        waiting = (
            "SELECT count(*) FROM pg_locks JOIN pg_database ON pg_database.oid = database"
            " WHERE NOT granted AND datname = current_database()"
        )
        wait_for(lambda: count(lane_url, waiting) >= 1, 30, "the commit waiting", celery.logs)
        celery.kill(worker)
        blocker.rollback()
        assert episode_counts(lane_url) == {"processing": 1}
        (lost,) = pipeline.llm_usage(producer).rows
        assert (lost.requests, lost.attempts) == (1, 1)
        assert lost.prompt_tokens > 0

        celery.worker(concurrency=1)
        celery.beat()  # the sweeper gives the episode back once its lease runs out
        wait_for(lambda: episode_counts(lane_url) == {"done": 1}, 60, "re-driven", celery.logs)
    finally:
        blocker.close()
        engine.dispose()
        celery.stop()
    (both,) = pipeline.llm_usage(producer).rows
    assert stub.stats.answered == 2
    assert (both.requests, both.attempts) == (2, 2)
    assert both.prompt_tokens == 2 * lost.prompt_tokens
    assert count(lane_url, "SELECT count(*) FROM facts") == 1
    assert count(lane_url, "SELECT lost_attempts FROM episodes") == 1
