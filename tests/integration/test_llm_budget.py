"""The endpoint's budget: token buckets for requests and tokens a minute and the pause a 429
asks for, in the process (inline mode, a clock the test moves) and in the local Redis (shared
by every worker, on Redis's clock)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx2
import pytest
import redis

from pipeline.errors import LlmUnavailable
from pipeline.extract import extract
from pipeline.extract.budget import BudgetUnavailable, LocalBudget, RedisBudget
from pipeline.extract.llm import LlmClient
from pipeline.settings import Settings
from tests.integration.celery_helpers import REDIS_URL
from tests.unit.extract_helpers import catalog, episode


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_local_request_bucket_holds_a_second_and_refills() -> None:
    clock = Clock()
    budget = LocalBudget(rpm=120, tpm=None, clock=clock)
    assert [budget.take(10) for _ in range(3)] == [0.0, 0.0, pytest.approx(0.5)]
    clock.now += 0.5
    assert budget.take(10) == 0.0


def test_the_local_token_bucket_charges_the_estimate_then_the_usage() -> None:
    clock = Clock()
    budget = LocalBudget(rpm=None, tpm=6000, clock=clock)  # 100 tokens a second
    assert budget.take(100) == 0.0
    budget.settle(50)  # the answer cost 150, not the 100 estimated
    assert budget.take(100) == pytest.approx(1.5)
    clock.now += 1.5
    assert budget.take(100) == 0.0


def test_a_local_pause_holds_every_request_until_it_ends() -> None:
    clock = Clock()
    budget = LocalBudget(rpm=None, tpm=None, clock=clock)
    assert budget.take(1) == 0.0
    budget.pause(3.0)
    budget.pause(1.0)  # a shorter pause does not shorten the one running
    assert budget.take(1) == pytest.approx(3.0)
    clock.now += 3.0
    assert budget.take(1) == 0.0


@pytest.fixture
def endpoint() -> Iterator[str]:
    name = f"http://llm.test/{uuid.uuid4()}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(f"sgam:llm:budget:{name}", f"sgam:llm:pause:{name}")
    client.close()


def test_workers_share_the_redis_bucket(endpoint: str) -> None:
    first, second = (RedisBudget(REDIS_URL, endpoint, rpm=120, tpm=None) for _ in range(2))
    try:
        waits = [first.take(10), second.take(10), first.take(10)]
    finally:
        first.close()
        second.close()
    assert waits[:2] == [0.0, 0.0]
    assert 0.3 < waits[2] <= 0.5


def test_a_redis_pause_reaches_every_worker(endpoint: str) -> None:
    first, second = (RedisBudget(REDIS_URL, endpoint, rpm=None, tpm=None) for _ in range(2))
    try:
        assert second.take(1) == 0.0
        first.pause(0.5)
        paused = second.take(1)
        time.sleep(0.55)
        resumed = second.take(1)
    finally:
        first.close()
        second.close()
    assert 0.3 < paused <= 0.5
    assert resumed == 0.0


def test_a_redis_that_cannot_be_reached_refuses_rather_than_lifts_the_budget() -> None:
    budget = RedisBudget("redis://127.0.0.1:9/0", "http://llm.test/v1", rpm=60, tpm=None)
    with pytest.raises(BudgetUnavailable, match="unavailable"):
        budget.take(1)


def test_an_extraction_whose_budget_cannot_be_read_is_retryable_and_sends_nothing() -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        llm_base_url="http://llm.test/v1",
        llm_max_attempts=1,
    )
    sent: list[httpx2.Request] = []

    def endpoint(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    budget = RedisBudget("redis://127.0.0.1:9/0", "http://llm.test/v1", rpm=60, tpm=None)
    client = LlmClient(settings, httpx2.MockTransport(endpoint), budget=budget)
    with pytest.raises(LlmUnavailable, match="budget's Redis is unavailable"):
        extract(episode("My plan is pro."), catalog=catalog(), settings=settings, llm=client)
    assert sent == []
