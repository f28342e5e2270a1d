"""A forget that lands while an episode is being read wins: the worker's finish and the hot
path's one-transaction write ask, under the subject's lock, whether the subject was forgotten
since the episode was received, and write nothing if so (the episode ends failed, the remember
is NotFound). On main before this, both wrote the value after the forget: readable again."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import insert

import pipeline
from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.episodes.records import new_row
from pipeline.episodes.stage import (
    RememberIn,
    claim,
    claimed_now,
    decide_and_finish,
    finish_new,
    read_row,
    run_extraction,
)
from pipeline.errors import NotFound
from pipeline.extract.backends import RULES
from pipeline.policy.decide import Lane
from schemas.intake import EpisodeIn
from tests.integration.pipeline_helpers import TENANT, episode

SAID = "My home city is Lisbon."


def _facts(store: Store) -> list[str]:
    return [f.value for f in pipeline.get(store, {"tenant_id": TENANT, "subject": "mira"})]


def _forget(store: Store) -> None:
    pipeline.forget(store, {"tenant_id": TENANT, "subject": "mira"})


def test_a_worker_that_read_an_episode_before_a_forget_writes_nothing(store: Store) -> None:
    received = EpisodeIn.model_validate(episode(SAID, "2026-06-01T09:00:00Z", "s1"))
    row = new_row(received, lane=Lane.BACKGROUND, received_at=store.clock())
    store.run(lambda unit: unit.session.execute(insert(EpisodeRow), [row]))
    (claimed,) = store.run(lambda unit: claim(unit, [(TENANT, row["episode_id"])]))
    extracted = run_extraction(store, claimed.episode, RULES)
    _forget(store)  # while the worker held the extraction

    outcome = decide_and_finish(store, [claimed], {claimed.key: extracted})[claimed.key]

    assert outcome.forgotten
    assert (outcome.status, outcome.decisions) == ("failed", [])
    assert outcome.error is not None
    assert "forgotten" in outcome.error
    assert _facts(store) == []
    with store.begin() as unit:
        stored = unit.session.get(EpisodeRow, claimed.key)
        assert stored is not None
        assert (stored.status, stored.error_kind) == ("failed", "permanent")


def test_a_worker_finishes_an_episode_received_after_the_forget(store: Store) -> None:
    """The check compares with the episode's receipt: what is said after a forget is kept."""
    _forget(store)
    received = EpisodeIn.model_validate(episode(SAID, "2026-06-01T09:00:00Z", "s1"))
    row = new_row(received, lane=Lane.BACKGROUND, received_at=store.clock())
    store.run(lambda unit: unit.session.execute(insert(EpisodeRow), [row]))
    (claimed,) = store.run(lambda unit: claim(unit, [(TENANT, row["episode_id"])]))
    extracted = run_extraction(store, claimed.episode, RULES)

    outcome = decide_and_finish(store, [claimed], {claimed.key: extracted})[claimed.key]

    assert (outcome.status, outcome.forgotten) == ("done", False)
    assert _facts(store) == ["Lisbon"]


def test_a_remember_that_read_before_a_forget_is_not_found_and_writes_nothing(
    store: Store,
) -> None:
    request = RememberIn(tenant_id=TENANT, subject="mira", text=SAID)
    now = store.clock()
    claimed = claimed_now(request, now)
    row = read_row(
        claimed.episode,
        trust=None,
        idempotency_key=None,
        actor=None,
        lane=Lane.HOT,
        received_at=now,
    )
    extracted = run_extraction(store, claimed.episode, RULES)
    assert not isinstance(extracted, Exception)
    _forget(store)

    with pytest.raises(NotFound, match="forgotten"):
        store.run(lambda unit: finish_new(unit, row, claimed, extracted))

    assert _facts(store) == []
    assert datetime.now(UTC) >= now
