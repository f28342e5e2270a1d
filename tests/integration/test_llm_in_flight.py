"""The model lane keeps many calls in flight and commits each episode when its answer is in,
against the stub OpenAI-compatible server (tests/integration/stub_llm.py) on SQLite and on
PostgreSQL, in inline mode (the Celery workers: test_llm_lane_celery.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from statistics import median
from typing import Any

import pytest

import pipeline
from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store, open_store
from pipeline.episodes.inflight import LeaseKeeper
from pipeline.episodes.process import process_episodes
from pipeline.episodes.stage import claim_waiting
from pipeline.extract.llm import shared_client
from pipeline.settings import Settings
from tests.integration.celery_helpers import REDIS_URL, flush_redis
from tests.integration.pipeline_helpers import TENANT, episode
from tests.integration.stub_llm import StubServer

TEXT = "The river view from my flat is lovely ({})."


@pytest.fixture
def stub() -> Iterator[Any]:
    with StubServer() as server:
        yield server


def _store(database_url: str, stub: Any, **settings: Any) -> Store:
    return open_store(
        Settings(
            _env_file=None,  # type: ignore[call-arg]
            database_url=database_url,
            llm_base_url=stub.base_url,
            llm_model="stub",
            **settings,
        )
    )


def _statuses(store: Store) -> dict[str, str]:
    listed = pipeline.list_episodes(store, {"tenant_id": TENANT})
    return {row.episode_id: row.status for row in listed}


def test_a_batch_has_every_call_in_flight_at_once(database_url: str, stub: Any) -> None:
    stub.app.configure(latency_s=0.5)
    store = _store(database_url, stub, worker_batch=40, llm_concurrency=16)
    try:
        lines = [episode(TEXT.format(n), "2026-06-01T09:00:00Z", "s1") for n in range(40)]
        report = pipeline.ingest(store, lines)
    finally:
        store.dispose()
    assert {receipt.status for receipt in report.receipts} == {"done"}
    # 40 calls of 0.5 s, 16 at a time: three waves, not forty calls one after another.
    assert stub.stats.peak_in_flight == 16
    assert stub.stats.answered == 40


@pytest.mark.slow
def test_a_slow_answer_holds_no_finished_episode_hostage(database_url: str, stub: Any) -> None:
    stub.app.delay = lambda request: 4.0 if "slow" in _episode_text(request) else 0.05
    # With a broker, ingest only stores and queues: this test plays the worker.
    store = _store(database_url, stub, broker_url=REDIS_URL, redis_url=REDIS_URL)
    try:
        texts = ["This one is slow to read.", *(TEXT.format(n) for n in range(5))]
        ids = [f"e{n}" for n in range(len(texts))]
        pipeline.ingest(
            store,
            [
                episode(text, "2026-06-01T09:00:00Z", "s1", episode_id=episode_id)
                for text, episode_id in zip(texts, ids, strict=True)
            ],
        )
        assert set(_statuses(store).values()) == {"pending"}
        worker = threading.Thread(
            target=process_episodes, args=(store, [(TENANT, episode_id) for episode_id in ids])
        )
        worker.start()
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and list(_statuses(store).values()).count("done") < 5:
            time.sleep(0.05)
        seen = _statuses(store)
        worker.join()
        after = _statuses(store)
    finally:
        store.dispose()
        flush_redis()  # the wake-ups nobody took
    assert seen == {"e0": "processing"} | {episode_id: "done" for episode_id in ids[1:]}
    assert after == {episode_id: "done" for episode_id in ids}


@pytest.mark.slow
def test_the_next_batch_is_claimed_while_the_last_ones_calls_are_out(
    database_url: str, stub: Any
) -> None:
    # Batches of 8, 8 calls at a time, answers spread over 0.6-1.3 s (long beside a stall of
    # this process on a loaded machine). Given one batch's keys
    # as a worker's task is, the process goes on with every episode that waits, and as each
    # call ends the next one starts: no request of the middle waves finds the endpoint idle
    # (one batch at a time, the first call of each batch would find nothing in flight).
    in_flight_at_arrival: list[int] = []

    def delay(request: dict[str, Any]) -> float:
        in_flight_at_arrival.append(stub.stats.in_flight)  # this request included
        number = int(_episode_text(request).split("(")[-1].split(")")[0])
        return 0.6 + 0.1 * (number % 8)

    stub.app.delay = delay
    store = _store(
        database_url,
        stub,
        broker_url=REDIS_URL,
        redis_url=REDIS_URL,
        worker_batch=8,
        llm_concurrency=8,
    )
    try:
        ids = [f"e{n:02d}" for n in range(40)]
        pipeline.ingest(
            store,
            [
                episode(TEXT.format(n), "2026-06-01T09:00:00Z", f"s{n}", episode_id=episode_id)
                for n, episode_id in enumerate(ids)
            ],
        )
        outcomes = process_episodes(store, [(TENANT, ids[0])], more=True)
        statuses = _statuses(store)
    finally:
        store.dispose()
        flush_redis()  # the wake-ups nobody took
    assert len(outcomes) == 40
    assert statuses == {episode_id: "done" for episode_id in ids}
    assert stub.stats.answered == 40
    assert stub.stats.peak_in_flight == 8
    # One batch at a time, each batch's calls would find 1, 2, ... 8 in flight (median 4.5);
    # overlapping, nearly every one finds the other 7 out. The median lets one stall of this
    # process (a slow commit on a busy machine) pass without letting batches in turn pass.
    assert median(in_flight_at_arrival[8:32]) >= 7, in_flight_at_arrival


def test_the_feed_takes_only_episodes_waiting_for_their_first_attempt(
    database_url: str, stub: Any
) -> None:
    store = _store(database_url, stub, broker_url=REDIS_URL, redis_url=REDIS_URL)
    try:
        pipeline.ingest(
            store,
            [
                episode(TEXT.format(n), "2026-06-01T09:00:00Z", "s1", episode_id=f"e{n}")
                for n in range(3)
            ],
        )
        with store.begin() as unit:
            retrying = unit.session.get(EpisodeRow, (TENANT, "e1"))
            lost = unit.session.get(EpisodeRow, (TENANT, "e2"))
            assert retrying is not None
            assert lost is not None
            retrying.attempts = 1  # a retryable failure, waiting out its backoff
            lost.status, lost.attempts, lost.lease_until = "processing", 1, unit.clock()
        with store.begin() as unit:
            taken = claim_waiting(unit, 10)
    finally:
        store.dispose()
        flush_redis()
    assert [item.key for item in taken] == [(TENANT, "e0")]
    assert taken[0].attempt == 1


def test_the_lease_is_renewed_while_the_calls_are_out(database_url: str, stub: Any) -> None:
    store = _store(database_url, stub, episode_lease_s=10)
    try:
        pipeline.ingest(store, [episode(TEXT.format(0), "2026-06-01T09:00:00Z", "s1")])
        (row,) = pipeline.list_episodes(store, {"tenant_id": TENANT})
        key = (TENANT, row.episode_id)
        with store.begin() as unit:  # the claim of a worker still waiting on the model
            held = unit.session.get(EpisodeRow, key)
            assert held is not None
            held.status, held.lease_until = "processing", unit.clock()
            attempt = held.attempts
        keeper = LeaseKeeper(store, {key: attempt})
        keeper._interval = 0.1  # renew at once rather than after a third of the lease
        with keeper:
            time.sleep(0.5)
        with store.begin() as unit:
            renewed = unit.session.get(EpisodeRow, key)
            assert renewed is not None
            left = (renewed.lease_until - unit.clock()).total_seconds()
    finally:
        store.dispose()
    assert keeper.renewals >= 1
    assert 9 < left <= 10


def test_one_client_per_process_reuses_its_connections(stub: Any) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        llm_base_url=stub.base_url,
        llm_model="stub",
    )
    assert shared_client(settings) is shared_client(settings)
    bounded = shared_client(settings).within(1.5)
    assert bounded._http is shared_client(settings)._http
    assert (bounded.deadline_s, bounded.settings.llm_deadline_s) == (1.5, 1.5)


def _episode_text(request: dict[str, Any]) -> str:
    """The episode the prompt asks about, without the earlier turns shown before it."""
    return str(request["messages"][-1]["content"]).rsplit("\nEpisode (", 1)[-1]
