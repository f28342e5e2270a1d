"""The hot path's idempotency: a repeated request answers what the first one wrote and writes
nothing; a key or an episode id reused for another request is IdempotencyConflict (409 over
HTTP), never a 500, another scope's fact or a forgotten value."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

import pipeline
from pipeline.db.models import EpisodeRow, EventRow
from pipeline.db.store import Store
from pipeline.errors import IdempotencyConflict

ASK = {
    "tenant_id": "acme",
    "subject": "mira",
    "text": "My home city is Lisbon.",
    "idempotency_key": "turn-1",
    "occurred_at": "2026-06-01T10:00:00Z",
}


def _counts(store: Store) -> tuple[int, int]:
    with store.begin() as unit:
        episodes = unit.session.scalar(select(func.count()).select_from(EpisodeRow)) or 0
        events = unit.session.scalar(select(func.count()).select_from(EventRow)) or 0
    return episodes, events


def test_a_repeat_answers_the_first_result_and_writes_nothing(store: Store) -> None:
    first = pipeline.remember(store, ASK)
    before = _counts(store)

    again = pipeline.remember(store, ASK)

    assert again.episode_id == first.episode_id
    assert [f.fact_id for f in again.facts] == [f.fact_id for f in first.facts]
    assert _counts(store) == before


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"text": "My home city is Porto."}, "another text under the same key"),
        ({"agent_id": "bot2"}, "the same key from another agent's scope"),
        ({"subject": "omar"}, "another subject under the same key"),
        ({"idempotency_key": "turn-2", "episode_id": "ep-1"}, "a taken episode id, new key"),
    ],
)
def test_a_reused_key_or_episode_id_for_another_request_is_a_conflict(
    store: Store, change: dict[str, Any], why: str
) -> None:
    pipeline.remember(store, ASK | {"episode_id": "ep-1"})
    before = _counts(store)

    with pytest.raises(IdempotencyConflict, match="another request"):
        pipeline.remember(store, ASK | {"episode_id": "ep-1"} | change)

    assert _counts(store) == before, why
    held = pipeline.get(store, {"tenant_id": "acme", "subject": "mira"})
    assert [fact.value for fact in held] == ["Lisbon"], why


def test_a_repeat_after_a_forget_returns_no_forgotten_value(store: Store) -> None:
    first = pipeline.remember(store, ASK)
    assert first.facts, "the first request wrote a fact"
    pipeline.forget(store, {"tenant_id": "acme", "subject": "mira"})

    again = pipeline.remember(store, ASK)

    assert again.episode_id == first.episode_id
    assert again.facts == []
