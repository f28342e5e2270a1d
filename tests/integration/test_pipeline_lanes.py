"""The hot path, consolidation, purge and replay of what the pipeline wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

import pipeline
from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store, open_store
from pipeline.settings import Settings
from tests.factories import FrozenClock, three_session_catalog
from tests.integration.pipeline_helpers import TENANT, candidates, episode, holds


def _remember(store: Store, text: str, **extra: str) -> pipeline.Remembered:
    return pipeline.remember(store, {"tenant_id": TENANT, "subject": "mira", "text": text} | extra)


def test_the_hot_path_writes_with_the_users_trust_at_once(store: Store) -> None:
    said = _remember(store, "Remember that my home city is Lisbon.", at="2026-06-01T09:00:00Z")

    (fact,) = said.facts
    assert (fact.value, fact.trust.value, said.deferred) == ("Lisbon", "user_confirmed", False)
    assert fact.source_episode_id == said.episode_id
    shown = pipeline.show_episode(store, TENANT, said.episode_id)
    assert (shown.lane, shown.status) == ("hot", "done")


def test_the_hot_path_bypasses_the_buffer_and_confirms_what_waits_there(store: Store) -> None:
    pipeline.ingest(store, episode("I prefer concise answers.", "2026-06-01T09:00:00Z", "s1"))
    (waiting,) = candidates(store)

    said = _remember(store, "I prefer concise answers.", at="2026-06-05T09:00:00Z")

    (fact,) = said.facts
    assert fact.trust.value == "user_confirmed"
    assert fact.valid_from == datetime(2026, 6, 1, 9, tzinfo=UTC)  # from the first time said
    (confirmed,) = candidates(store, "confirmed")
    assert (confirmed.candidate_id, confirmed.fact_id) == (
        waiting.candidate_id,
        fact.fact_id,
    )


def test_nothing_to_remember_writes_nothing(store: Store) -> None:
    said = _remember(store, "What is the weather like in Lisbon?")
    assert (said.facts, said.deferred) == ([], False)
    assert pipeline.get(store, {"tenant_id": TENANT, "subject": "mira"}) == []


def test_a_repeated_remember_is_answered_from_the_first(store: Store) -> None:
    first = _remember(store, "My home city is Lisbon.", idempotency_key="turn-7")
    again = _remember(store, "My home city is Lisbon.", idempotency_key="turn-7")

    assert again.episode_id == first.episode_id
    assert [f.fact_id for f in again.facts] == [f.fact_id for f in first.facts]
    assert len(pipeline.list_episodes(store, {"tenant_id": TENANT})) == 1


def test_a_hot_path_conflict_is_reported_with_the_facts_involved(store: Store) -> None:
    _remember(store, "My home city is Lisbon.", at="2026-06-01T09:00:00Z")
    said = _remember(store, "My home city is Porto.", at="2026-06-01T09:00:00Z")

    assert said.facts == []
    (conflict,) = said.conflicts
    assert isinstance(conflict, pipeline.FactConflict)
    assert said.rejected[0].reason == "FactConflict"
    assert holds(store, "home_city") == "Lisbon"


def test_consolidation_expires_stale_candidates_and_is_idempotent(
    clocked_store: Store, clock: FrozenClock
) -> None:
    store = clocked_store
    pipeline.ingest(store, episode("I prefer concise answers.", "2026-06-01T09:00:00Z", "s1"))
    pipeline.ingest(store, episode("My contact channel is email.", "2026-11-28T09:00:00Z", "s2"))
    now = clock.now

    first = pipeline.consolidate(store, {"now": now})
    second = pipeline.consolidate(store, {"now": now})

    assert first.counts["expired_candidates"] == 1  # concise: no support for 30 days
    assert [c.attribute for c in candidates(store)] == ["contact_channel"]
    assert second.counts == dict.fromkeys(second.counts, 0)
    assert (first.recorded, second.recorded) == (True, False)
    reports = [
        e for e in pipeline.decision_log(store, {"tenant_id": TENANT}) if e.kind == "consolidation"
    ]
    assert reports == []  # an all-tenants run is logged without a tenant
    with pytest.raises(pipeline.InvalidInput):
        pipeline.consolidate(store, {"now": now + timedelta(days=1)})


def test_consolidation_promotes_what_became_eligible(tmp_path: Path) -> None:
    """The catalogue asked for three sessions; now it asks for two: the next consolidation
    promotes the candidate that two sessions already support."""
    stricter = three_session_catalog(tmp_path)
    url = f"sqlite:///{tmp_path / 'eligible.sqlite3'}"
    strict = open_store(Settings(database_url=url, catalog_path=stricter))
    pipeline.ingest(strict, episode("I prefer concise answers.", "2026-06-01T09:00:00Z", "s1"))
    pipeline.ingest(strict, episode("I prefer concise answers.", "2026-06-02T09:00:00Z", "s2"))
    assert holds(strict, "answer_style") is None
    strict.dispose()

    relaxed = open_store(Settings(database_url=url))
    counted = {"lane": "consolidation", "action": "promoted"}
    before = REGISTRY.get_sample_value("sgam_decisions_total", counted) or 0
    try:
        report = pipeline.consolidate(relaxed, {})
        assert report.counts["promoted"] == 1
        assert REGISTRY.get_sample_value("sgam_decisions_total", counted) == before + 1
        assert holds(relaxed, "answer_style") == "concise"
    finally:
        relaxed.dispose()


def test_purge_erases_episode_texts_and_candidate_evidence(store: Store) -> None:
    mark = "PURGEMARK-7731"
    pipeline.ingest(
        store,
        episode(
            f"My contact channel is email. {mark}",
            "2026-06-01T09:00:00Z",
            "s1",
            metadata={"note": mark},
        ),
    )
    _remember(store, f"My home city is Lisbon. {mark}")
    (episode_row, _) = pipeline.list_episodes(store, {"tenant_id": TENANT})

    pipeline.forget(store, {"tenant_id": TENANT, "subject": "mira", "purge": True})

    with pytest.raises(pipeline.NotFound):  # nothing of a forgotten subject is shown
        pipeline.show_episode(store, TENANT, episode_row.episode_id)
    with store.begin() as unit:  # and what is stored is erased
        row = unit.session.get(EpisodeRow, (TENANT, episode_row.episode_id))
        assert row is not None
        assert (row.text, row.meta) == (None, None)
    assert pipeline.list_candidates(store, {"tenant_id": TENANT, "status": None}) == []
    from tests.integration.ledger_helpers import occurrences

    assert occurrences(store, mark) == {}


def test_replay_rebuilds_the_buffer_and_copies_the_episodes(
    database_url: str, tmp_path: Path
) -> None:
    source = open_store(Settings(database_url=database_url))
    target = open_store(Settings(database_url=f"sqlite:///{tmp_path / 'replayed.sqlite3'}"))
    try:
        pipeline.ingest(source, episode("I prefer concise answers.", "2026-06-01T09:00:00Z", "s1"))
        pipeline.ingest(
            source, episode("My contact channel is email.", "2026-06-01T09:00:00Z", "s1")
        )
        pipeline.ingest(source, episode("I prefer concise answers.", "2026-06-09T09:00:00Z", "s2"))
        (waiting,) = candidates(source)
        pipeline.reject(source, {"tenant_id": TENANT, "candidate_id": waiting.candidate_id})

        pipeline.replay(source, target)

        for status in ("buffered", "promoted", "rejected", None):
            assert candidates(target, status) == candidates(source, status)
        assert pipeline.list_episodes(target, {"tenant_id": TENANT}) == pipeline.list_episodes(
            source, {"tenant_id": TENANT}
        )
        assert holds(target, "answer_style") == "concise"
    finally:
        source.dispose()
        target.dispose()
