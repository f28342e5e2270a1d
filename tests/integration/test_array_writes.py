"""The writes of many rows by one array per column on PostgreSQL (SQLAlchemy's own on SQLite):
`inserts.insert_new`, the intake's INSERT, skips a row whose key is taken, answers only the
rows inserted and stores every field as SQLAlchemy's INSERT would; `updates.update_loaded`,
the claim's UPDATE, leaves the rows and the ORM's view of them as assignments would."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import delete, insert, select
from sqlalchemy.exc import DBAPIError

from pipeline.db.inserts import insert_new
from pipeline.db.models import EPISODES, EpisodeRow
from pipeline.db.store import Store, open_store
from pipeline.db.unit import Unit
from pipeline.db.updates import update_loaded
from pipeline.episodes.records import new_row
from pipeline.policy.decide import Lane
from schemas.intake import EpisodeIn
from tests.databases import empty_database
from tests.factories import isolated_settings

RECEIVED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
KEY = ("tenant_id", "episode_id")


def _row(episode_id: str, **fields: Any) -> dict[str, Any]:
    episode = EpisodeIn.model_validate(
        {
            "tenant_id": "t",
            "subject": "anna",
            "episode_id": episode_id,
            "session_id": "s-0",
            "occurred_at": "2026-11-28T09:30:00+02:00",
            "text": f"Anna said {episode_id}",
            **fields,
        }
    )
    return new_row(episode, lane=Lane.BACKGROUND, received_at=RECEIVED, input_seq=1)


def _stored(store: Store) -> dict[str, dict[str, Any]]:
    def read(unit: Unit) -> dict[str, dict[str, Any]]:
        rows = unit.session.scalars(select(EpisodeRow).order_by(EpisodeRow.episode_id))
        return {
            row.episode_id: {a.key: getattr(row, a.key) for a in row.__mapper__.column_attrs}
            for row in rows
        }

    return store.run(read)


def test_taken_keys_are_skipped_and_only_inserted_rows_answered(store: Store) -> None:
    store.run(lambda unit: insert_new(unit.session, EpisodeRow, [_row("e1")], KEY))
    rows = [_row("e1"), _row("e2"), _row("e2"), _row("e3")]
    inserted = store.run(lambda unit: insert_new(unit.session, EpisodeRow, rows, KEY))
    assert sorted(inserted) == [("t", "e2"), ("t", "e3")]
    assert list(_stored(store)) == ["e1", "e2", "e3"]


def test_every_field_is_stored_as_sqlalchemys_insert_stores_it(store: Store) -> None:
    fields = {
        "subject_names": ["Anna", "Anna K."],
        "metadata": {"channel": "chat", "nested": {"n": 1}},
        "idempotency_key": "k-1",
        "trust": "untrusted",
    }
    ours = [_row("ours", **fields), _row("ours-bare")]
    theirs = [_row("theirs", **fields), _row("theirs-bare")]
    store.run(lambda unit: insert_new(unit.session, EpisodeRow, ours, KEY))
    theirs[0]["idempotency_key"] = "k-2"
    store.run(lambda unit: unit.session.execute(insert(EPISODES), theirs))
    stored = _stored(store)

    def same(row: dict[str, Any]) -> dict[str, Any]:
        return {
            k: v
            for k, v in row.items()
            if k not in {"episode_id", "text", "text_hash", "idempotency_key"}
        }

    assert same(stored["ours"]) == same(stored["theirs"])
    assert same(stored["ours-bare"]) == same(stored["theirs-bare"])
    assert stored["ours"]["meta"] == {"channel": "chat", "nested": {"n": 1}}
    assert stored["ours"]["occurred_at"] == datetime(2026, 11, 28, 7, 30, tzinfo=UTC)


def test_rows_must_name_the_same_columns(store: Store) -> None:
    short = _row("e2")
    del short["input_seq"]
    with pytest.raises(ValueError, match="must name the same columns"):
        store.run(lambda unit: insert_new(unit.session, EpisodeRow, [_row("e1"), short], KEY))
    assert _stored(store) == {}


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[Store]:
    """An empty PostgreSQL store, for what only PostgreSQL checks."""
    empty_database(postgres_url)
    store = open_store(isolated_settings(database_url=postgres_url))
    yield store
    store.dispose()


@pytest.mark.postgres
def test_a_value_too_long_is_refused_not_cut(postgres_store: Store) -> None:
    """The arrays are cast to text, not to the columns' VARCHAR(n), which would cut."""
    long = _row("e1") | {"agent_id": "a" * 201}
    with pytest.raises(DBAPIError, match="too long"):
        postgres_store.run(lambda unit: insert_new(unit.session, EpisodeRow, [long], KEY))
    assert _stored(postgres_store) == {}


def _claimable(store: Store, count: int) -> None:
    rows = [_row(f"e{number}") for number in range(count)]
    store.run(lambda unit: insert_new(unit.session, EpisodeRow, rows, KEY))


def test_update_loaded_writes_every_row_and_leaves_nothing_to_flush(store: Store) -> None:
    _claimable(store, 3)
    later = datetime(2026, 11, 29, 12, 5, tzinfo=UTC)

    def claim(unit: Unit) -> list[tuple[str, str, int, Any]]:
        rows = list(unit.session.scalars(select(EpisodeRow).order_by(EpisodeRow.episode_id)))
        changes = [
            (row, {"status": "processing", "attempts": row.attempts + number, "lease_until": later})
            for number, row in enumerate(rows, start=1)
        ]
        update_loaded(unit.session, changes)
        if store.is_postgres:  # written already: the ORM holds them as loaded
            assert not unit.session.dirty
        return [(row.episode_id, row.status, row.attempts, row.lease_until) for row in rows]

    seen = store.run(claim)
    stored = _stored(store)
    assert seen == [
        (episode_id, stored[episode_id]["status"], stored[episode_id]["attempts"], later)
        for episode_id in ["e0", "e1", "e2"]
    ]
    assert [stored[e]["attempts"] for e in ["e0", "e1", "e2"]] == [1, 2, 3]
    assert {stored[e]["lease_until"] for e in stored} == {later}


def test_update_loaded_refuses_rows_of_unequal_columns(store: Store) -> None:
    _claimable(store, 2)

    def claim(unit: Unit) -> None:
        first, second = unit.session.scalars(select(EpisodeRow).order_by(EpisodeRow.episode_id))
        update_loaded(unit.session, [(first, {"attempts": 1}), (second, {"status": "done"})])

    with pytest.raises(ValueError, match="each with the same columns"):
        store.run(claim)
    assert {row["attempts"] for row in _stored(store).values()} == {0}


@pytest.mark.postgres
def test_update_loaded_refuses_a_row_that_is_gone(postgres_store: Store) -> None:
    _claimable(postgres_store, 2)

    def claim(unit: Unit) -> None:
        rows = list(unit.session.scalars(select(EpisodeRow)))
        unit.session.execute(delete(EpisodeRow).where(EpisodeRow.episode_id == "e1"))
        update_loaded(unit.session, [(row, {"attempts": 1}) for row in rows])

    with pytest.raises(RuntimeError, match="1 of 2 rows updated"):
        postgres_store.run(claim)
    assert {row["attempts"] for row in _stored(postgres_store).values()} == {0}
