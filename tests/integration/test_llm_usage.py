"""Usage of the model lane per tenant, model and day — `pipeline.llm_usage` and `sgam usage` —
from episodes read through the stub OpenAI-compatible server, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import pipeline
from pipeline.db.store import Store, open_store
from pipeline.settings import Settings
from tests.integration.ledger_helpers import cli, cli_json
from tests.integration.pipeline_helpers import TENANT, episode
from tests.integration.stub_llm import StubServer


@pytest.fixture
def stub() -> Iterator[Any]:
    with StubServer() as server:
        yield server


def _store(database_url: str, stub: Any | None, **settings: Any) -> Store:
    model = {"llm_base_url": stub.base_url, "llm_model": "stub"} if stub is not None else {}
    return open_store(
        Settings(
            _env_file=None,  # type: ignore[call-arg]
            database_url=database_url,
            **model,
            **settings,
        )
    )


def _ingest(store: Store, days: list[str], tenant: str = TENANT) -> None:
    lines = [
        episode(f"Turn {n}: the view is lovely.", f"{day}T09:00:00Z", "s1", tenant_id=tenant)
        for n, day in enumerate(days)
    ]
    assert {r.status for r in pipeline.ingest(store, lines).receipts} == {"done"}


def _spent(store: Store, tenant: str) -> tuple[int, int, int]:
    """Attempts, prompt and completion tokens as the episodes recorded them."""
    shown = [
        pipeline.show_episode(store, tenant, row.episode_id).usage
        for row in pipeline.list_episodes(store, {"tenant_id": tenant})
    ]
    return (
        sum(usage["attempts"] for usage in shown),
        sum(usage["prompt_tokens"] for usage in shown),
        sum(usage["completion_tokens"] for usage in shown),
    )


def test_usage_per_tenant_model_and_day_with_cost(database_url: str, stub: Any) -> None:
    store = _store(database_url, stub, llm_price_in=0.5, llm_price_out=2.0)
    try:
        _ingest(store, ["2026-06-01"] * 3)
        _ingest(store, ["2026-06-01"], tenant="other")
        attempts, prompt, completion = _spent(store, TENANT)
        report = pipeline.llm_usage(store, {"tenant_id": TENANT})
        everyone = pipeline.llm_usage(store)
    finally:
        store.dispose()
    (row,) = report.rows
    assert (row.tenant_id, row.model, row.requests, row.attempts) == (TENANT, "stub", 3, 3)
    assert (row.prompt_tokens, row.completion_tokens) == (prompt, completion)
    assert prompt > 0
    assert attempts == 3
    assert row.latency_p50_ms <= row.latency_p99_ms
    assert row.cost == pytest.approx((prompt * 0.5 + completion * 2.0) / 1e6)
    assert report.total_cost == row.cost
    assert sorted(r.tenant_id for r in everyone.rows) == ["acme", "other"]


def test_every_extraction_of_an_episode_is_counted(database_url: str, stub: Any) -> None:
    """A try that failed spent tokens too: a retried episode counts both extractions."""
    invalid = {"updates": "not a list"}
    stub.app.answer = lambda _request: invalid
    store = _store(database_url, stub)
    try:
        (receipt,) = pipeline.ingest(
            store, episode("The view is lovely.", "2026-06-01T09:00:00Z", "s1")
        ).receipts
        assert receipt.status == "failed"
        failed = pipeline.show_episode(store, TENANT, receipt.episode_id).usage
        stub.app.answer = lambda _request: {"updates": []}
        retried = pipeline.retry_episode(
            store, {"tenant_id": TENANT, "episode_id": receipt.episode_id}
        )
        assert retried.status == "done"
        done = pipeline.show_episode(store, TENANT, receipt.episode_id).usage
        (row,) = pipeline.llm_usage(store).rows
    finally:
        store.dispose()
    assert failed is not None
    assert done is not None
    assert failed["attempts"] == 3  # the answer and two re-asks
    assert [item["attempts"] for item in done["earlier"]] == [3]
    assert (row.requests, row.attempts) == (2, 3 + done["attempts"])
    assert row.prompt_tokens == failed["prompt_tokens"] + done["prompt_tokens"] > 0


def test_the_rules_spend_nothing_and_no_price_means_no_cost(database_url: str, stub: Any) -> None:
    rules = _store(database_url, None)
    model = _store(database_url, stub)
    try:
        _ingest(rules, ["2026-06-01"])
        assert pipeline.llm_usage(rules).rows == []
        _ingest(model, ["2026-06-01"])
        report = pipeline.llm_usage(model, {"since": "2000-01-01T00:00:00Z"})
        later = pipeline.llm_usage(model, {"since": "2999-01-01T00:00:00Z"})
    finally:
        rules.dispose()
        model.dispose()
    ((row,),) = [report.rows]
    assert (row.requests, row.cost, report.total_cost) == (1, None, None)
    assert later.rows == []


def test_sgam_usage_prints_json_and_exits_1_on_nothing(
    database_url: str, stub: Any, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    store = _store(database_url, stub)
    try:
        _ingest(store, ["2026-06-01", "2026-06-02"])
    finally:
        store.dispose()
    monkeypatch.setenv("SGAM_DATABASE_URL", database_url)
    monkeypatch.setenv("SGAM_LLM_PRICE_IN", "1")
    code, shown = cli_json(capsys, "usage", "--tenant", TENANT)
    assert code == 0
    # The day is when the model was paid for (the extraction), not when the turn was said.
    assert [row["requests"] for row in shown["rows"]] == [2]
    assert shown["total_cost"] is not None
    code, out, _ = cli(capsys, "usage", "--tenant", "nobody")
    assert code == 1
    code, _, err = cli(capsys, "usage", "--since", "yesterday")
    assert code == 2
    assert err.startswith("sgam: --since:")
