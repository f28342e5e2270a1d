"""The text index dies with a purge: no indexed word of a purged fact or episode is left in
the database files (SQLite, after the purge itself) or in any page of the tables and their
text indexes (PostgreSQL, after `purge-vacuum`). The index stores words lowercased and
stemmed, so the checks look for lowercase words that stem to themselves."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

import pipeline
from pipeline.db import search_index
from pipeline.db.store import Store, open_store
from pipeline.settings import Settings

READ = {"tenant_id": "acme", "subject": "mira"}


def _words(count: int) -> list[str]:
    # Letters only, ending in a consonant cluster no stemmer shortens.
    return [
        f"zq{uuid.uuid4().hex[:8].translate(str.maketrans('0123456789', 'ghjklmnpqr'))}x"
        for _ in range(count)
    ]


def _write(store: Store, words: list[str]) -> None:
    half = len(words) // 2
    for index, word in enumerate(words[:half]):
        pipeline.put(
            store,
            READ
            | {
                "attribute": "open_cases",
                "value": f"case {word}",
                "evidence": f"said {word}",
                "valid_from": f"2026-01-{index % 28 + 1:02d}T00:00:00Z",
                "source_episode_id": f"e{index}",
            },
        )
    episodes = [
        READ
        | {"session_id": "s1", "occurred_at": "2026-05-01T10:00:00Z", "text": f"we spoke of {w}"}
        for w in words[half:]
    ]
    pipeline.ingest(store, episodes)
    for word in (words[0], words[-1]):  # the index holds them: a search finds each
        assert pipeline.search(store, READ | {"query": word}).found, word


def _files_holding(path: Path, words: list[str]) -> list[str]:
    files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
    contents = b"".join(file.read_bytes() for file in files if file.exists())
    return [word for word in words if word.encode() in contents]


def test_sqlite_purge_leaves_no_indexed_word_in_the_files(tmp_path: Path) -> None:
    path = tmp_path / "search.sqlite3"
    store = open_store(Settings(database_url=f"sqlite:///{path}"))
    words = _words(20)
    try:
        _write(store, words)
        assert _files_holding(path, words) == words

        result = pipeline.forget(store, READ | {"purge": True})

        assert result.files_scrubbed is True
        assert _files_holding(path, words) == []
        assert not pipeline.search(store, READ | {"query": " ".join(words)}).found
    finally:
        store.dispose()


@pytest.mark.postgres
def test_postgres_purge_vacuum_leaves_no_indexed_word_in_tables_or_indexes(
    postgres_url: str,
) -> None:
    from tests.databases import empty_database

    empty_database(postgres_url)
    store = open_store(Settings(database_url=postgres_url))
    words = _words(20)
    relations = ["facts", "episodes", search_index.FACTS_GIN, search_index.EPISODES_GIN]
    try:
        _write(store, words)
        assert set(_pages_holding(store, relations, words)) == set(words)

        pipeline.forget(store, READ | {"purge": True})
        store.vacuum(wait_s=120)

        assert _pages_holding(store, relations, words) == []
    finally:
        store.dispose()


def _pages_holding(store: Store, relations: list[str], words: list[str]) -> list[str]:
    """The words found in any page of the relations or their TOAST tables, read raw."""
    found: set[str] = set()
    with store.engine.begin() as connection:
        connection.execute(text("CREATE EXTENSION IF NOT EXISTS pageinspect"))
        named = connection.execute(
            text(
                "SELECT c.oid::regclass::text FROM pg_class c WHERE c.relname = ANY(:r) UNION "
                "SELECT t.oid::regclass::text FROM pg_class c JOIN pg_class t "
                "ON t.oid = c.reltoastrelid WHERE c.relname = ANY(:r)"
            ),
            {"r": relations},
        ).scalars()
        for relation in list(named):
            pages = connection.execute(
                text("SELECT pg_relation_size(CAST(:r AS regclass)) / 8192"), {"r": relation}
            ).scalar_one()
            for page in range(pages):
                raw = bytes(
                    connection.execute(
                        text("SELECT get_raw_page(:r, :p)"), {"r": relation, "p": page}
                    ).scalar_one()
                )
                found.update(word for word in words if word.encode() in raw)
    return sorted(found)
