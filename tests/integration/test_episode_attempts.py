"""Attempts lost to a crash or an expired lease are counted apart from attempts that failed;
consolidation re-drives an episode whose every attempt was lost; and a hot-path statement the
background lane took over is still decided as the user's own."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest
from sqlalchemy import insert, update

import pipeline
from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store, open_store
from pipeline.episodes.process import process_episodes
from pipeline.episodes.records import new_row
from pipeline.episodes.stage import claim, finish
from pipeline.extract import ExtractionContext, judged
from pipeline.extract.llm import LlmClient
from pipeline.policy.decide import Lane
from pipeline.settings import Settings
from schemas.extraction import MemoryUpdate, Usage
from schemas.intake import EpisodeIn
from schemas.results import EpisodeDetail
from tests.integration.pipeline_helpers import TENANT, episode, holds

NOW = datetime.now(UTC)


class Down(httpx2.BaseTransport):
    """An endpoint that refuses every connection."""

    def __init__(self) -> None:
        self.refused = 0

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.refused += 1
        raise httpx2.ConnectError("connection refused", request=request)


@pytest.fixture
def model_store(settings: Settings) -> Iterator[Store]:
    configured = settings.model_copy(
        update={
            "llm_base_url": "http://llm.test/v1",
            "llm_max_attempts": 1,
            "episode_max_attempts": 2,
        }
    )
    store = open_store(configured)
    yield store
    store.dispose()


def _lose_the_claim(store: Store, episode_id: str, **columns: Any) -> None:
    """As a worker killed mid-extraction leaves it: processing, its lease run out."""
    with store.begin() as unit:
        unit.session.execute(
            update(EpisodeRow)
            .where(EpisodeRow.episode_id == episode_id)
            .values(status="processing", lease_until=unit.clock() - timedelta(seconds=1), **columns)
        )


def _row(store: Store, episode_id: str) -> EpisodeDetail:
    return pipeline.show_episode(store, TENANT, episode_id)


def _stored(store: Store, episode_id: str, text: str) -> None:
    """An episode stored and waiting, as intake leaves it before a worker claims it."""
    received = episode(text, "2026-06-01T09:00:00Z", "s1") | {"episode_id": episode_id}
    row = new_row(EpisodeIn.model_validate(received), lane=Lane.BACKGROUND, received_at=NOW)
    store.run(lambda unit: unit.session.execute(insert(EpisodeRow), [row]))


def test_a_lost_attempt_does_not_spend_the_budget_of_failed_ones(model_store: Store) -> None:
    endpoint = Down()
    llm = LlmClient(model_store.settings, transport=endpoint)
    _stored(model_store, "e-lost", "The river view is lovely.")
    _lose_the_claim(model_store, "e-lost", attempts=1)  # the first claim's worker died

    (outcome,) = process_episodes(model_store, [(TENANT, "e-lost")], llm=llm).values()

    # Two attempts taken, one lost and one failed: the failed budget (2) is not spent yet.
    shown = _row(model_store, "e-lost")
    assert (outcome.status, shown.attempts, shown.lost_attempts) == ("pending", 2, 1)
    (outcome,) = process_episodes(model_store, [(TENANT, "e-lost")], llm=llm).values()
    shown = _row(model_store, "e-lost")
    assert (outcome.status, shown.attempts, shown.lost_attempts) == ("failed", 3, 1)
    assert shown.last_error.startswith("LlmUnavailable")
    assert endpoint.refused == 2  # the lost attempt sent nothing of this process's


def test_an_episode_whose_attempts_were_all_lost_is_redriven_by_consolidation(
    store: Store,
) -> None:
    (receipt,) = pipeline.ingest(
        store, episode("My home city is Lisbon.", "2026-06-01T09:00:00Z", "s1")
    ).receipts
    budget = store.settings.episode_max_attempts
    # Every claim so far died; each one after the first counted the one before it as lost.
    _lose_the_claim(store, receipt.episode_id, attempts=budget, lost_attempts=budget - 1)

    assert process_episodes(store, [(TENANT, receipt.episode_id)]) == {}
    failed = _row(store, receipt.episode_id)
    assert (failed.status, failed.lost_attempts) == ("failed", budget)
    assert failed.last_error == f"gave up after {budget} attempts that did not finish"

    report = pipeline.consolidate(store, {})

    assert report.counts["redriven"] == 1
    done = _row(store, receipt.episode_id)
    assert (done.status, done.attempts, done.lost_attempts) == ("done", 1, 0)
    assert holds(store, "home_city") == "Lisbon"


@pytest.mark.parametrize(
    ("attribute", "value", "why"),
    [
        ("birthday", "1990-04-02", "sensitive: quarantined unless stated on the hot path"),
        ("contact_channel", "email", "confirm-only: buffered unless the user stated it"),
    ],
)
def test_a_deferred_hot_path_statement_keeps_the_users_trust(
    model_store: Store, attribute: str, value: str, why: str
) -> None:
    llm = LlmClient(model_store.settings, transport=Down())
    text = f"Please note: {attribute.replace('_', ' ')} {value}, thanks."
    said = pipeline.remember(
        model_store,
        {"tenant_id": TENANT, "subject": "mira", "text": text, "at": "2026-06-01T09:00:00Z"},
        llm=llm,
    )
    assert said.deferred
    waiting = _row(model_store, said.episode_id)
    assert (waiting.status, waiting.lane, waiting.deferred) == (
        "pending",
        "background",
        True,
    )

    # The background lane claims it, and its model answers (here: the answer as the model
    # backend would judge it, built without a model: this test is about the policy's input).
    (claimed,) = model_store.run(lambda unit: claim(unit, [(TENANT, said.episode_id)]))
    assert claimed.origin.trust.value == "user_confirmed", why
    proposed = MemoryUpdate(
        evidence=f"{attribute.replace('_', ' ')} {value}",
        subject="I",
        attribute=attribute,
        current_value=None,
        change="new",
        value=value,
        valid_from=None,
    )
    result = judged(
        claimed.episode,
        [proposed],
        ExtractionContext(model_store.catalog),
        Usage(extractor="llm:test-model"),
    )
    assert [c.attribute for c in result.kept] == [attribute]
    outcome = model_store.run(lambda unit: finish(unit, [claimed], {claimed.key: result}))
    (decision,) = outcome[claimed.key].decisions

    assert decision.action == "written", why
    assert decision.fact is not None
    assert (decision.fact.trust.value, decision.fact.status.value) == (
        "user_confirmed",
        "active",
    )
