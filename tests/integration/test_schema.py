"""The models and the migrations describe the same database, guards included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from pipeline.db import guards, search_index
from pipeline.db.models import Base
from pipeline.db.store import Store

# The text index differs per backend and is compared with its own description below.
_COMPARE = {
    "compare_type": True,
    "include_name": lambda name, kind, parent: not search_index.is_search_object(name),
}


def test_autogenerate_finds_no_difference_after_migrating(store: Store) -> None:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts=_COMPARE)
        assert compare_metadata(context, Base.metadata) == []


def test_autogenerate_would_notice_a_missing_invariant_index(store: Store) -> None:
    """The comparison above can fail: dropping the one-open-row index is reported."""
    with store.engine.connect() as connection:
        transaction = connection.begin()  # DDL is transactional on both stores: undone below
        connection.execute(text("DROP INDEX uq_facts_one_open"))
        context = MigrationContext.configure(connection, opts=_COMPARE)
        differences = compare_metadata(context, Base.metadata)
        transaction.rollback()
    assert [(kind, index.name) for kind, index in differences] == [
        ("add_index", "uq_facts_one_open")
    ]


def test_the_migrated_guards_are_the_described_ones(store: Store) -> None:
    with store.engine.connect() as connection:
        if store.is_postgres:
            definition = connection.execute(
                text(
                    "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                    "WHERE conname = :name AND contype = 'x'"
                ),
                {"name": guards.EXCLUSION_NAME},
            ).scalar_one()
            assert "tstzrange(valid_from, valid_to, '[)'::text) WITH &&" in definition
            for column in guards.SLOT_COLUMNS:
                assert f"{column} WITH =" in definition
        else:
            rows = connection.execute(
                text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
            )
            triggers = {name: sql for name, sql in rows}
            assert triggers == guards.SQLITE_TRIGGERS | search_index.SQLITE_TRIGGERS


def test_create_all_builds_the_guards_too(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/created.sqlite3")
    Base.metadata.create_all(engine)
    row = (
        "INSERT INTO facts (fact_id, version, recorded_at, status, tenant_id, agent_id, purpose,"
        " subject, attribute, slot, cardinality, value_hash, kind, schema_version, valid_from,"
        " source_episode_id, confidence, trust) VALUES (:id, 1, '2026-01-01T00:00:00.000000Z',"
        " 'active', 't', 'a', 'p', 's', 'x', '', 'one', :hash, 'fact', 'v',"
        " :start, 'e', 1, 'verified')"
    )
    with engine.begin() as connection:
        connection.execute(
            text(row), {"id": "f1", "hash": "h1", "start": "2026-01-01T00:00:00.000000Z"}
        )
    with pytest.raises(DBAPIError, match="overlapping"), engine.begin() as connection:
        connection.execute(
            text(row), {"id": "f2", "hash": "h2", "start": "2026-02-01T00:00:00.000000Z"}
        )
    engine.dispose()


def test_head_constant_is_alembics_head() -> None:
    from alembic.script import ScriptDirectory

    from pipeline.db.migrations import HEAD
    from pipeline.db.store import _alembic_config

    assert ScriptDirectory.from_config(_alembic_config()).get_current_head() == HEAD


def test_the_migrated_search_index_is_the_described_one(store: Store) -> None:
    """The generated columns and partial GINs (PostgreSQL), the FTS5 tables (SQLite)."""
    with store.engine.connect() as connection:
        if store.is_postgres:
            rows = connection.execute(
                text(
                    "SELECT table_name, generation_expression FROM information_schema.columns "
                    "WHERE column_name = 'search_vector' ORDER BY table_name"
                )
            ).all()
            assert [table for table, _ in rows] == ["episodes", "facts"]
            assert all("'english'::regconfig" in expression for _, expression in rows)
            indexes = connection.execute(
                text("SELECT indexdef FROM pg_indexes WHERE indexname LIKE '%search_vector'")
            ).scalars()
            assert sorted(indexes) == [
                f"CREATE INDEX ix_{table}_search_vector ON public.{table} USING gin "
                "(search_vector) WHERE (forgotten_at IS NULL)"
                for table in ("episodes", "facts")
            ]
        else:
            tables = connection.execute(
                text("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'")
            ).scalars()
            assert sorted(tables) == [
                "episodes_search",
                "episodes_search_terms",
                "facts_search",
                "facts_search_terms",
            ]


def test_the_vectors_stay_in_their_rows_on_postgres(store: Store) -> None:
    """MAIN storage (migration 0011): a 768-dimension vector is read from its row, not TOAST."""
    if not store.is_postgres:
        pytest.skip("SQLite keeps a 3 KB value in its page")
    with store.engine.begin() as connection:
        storage = connection.execute(
            text(
                "SELECT attrelid::regclass::text, attstorage FROM pg_attribute"
                " WHERE attname = 'vector' AND attrelid::regclass::text LIKE '%_vectors'"
                " ORDER BY 1"
            )
        ).all()
        assert storage == [("episode_vectors", "m"), ("fact_vectors", "m")]
        connection.execute(
            text(
                "INSERT INTO episode_vectors (tenant_id, episode_id, subject, model, vector,"
                " embedded_at) VALUES ('t', 'e1', 's', 'm', :vector, now())"
            ),
            {"vector": os.urandom(3072)},  # 768 float32 that do not compress
        )
        outside = connection.execute(
            text(
                "SELECT pg_relation_size(reltoastrelid) FROM pg_class"
                " WHERE oid = 'episode_vectors'::regclass"
            )
        ).scalar_one()
        connection.rollback()
    assert outside == 0
