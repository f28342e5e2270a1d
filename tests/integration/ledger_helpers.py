"""Helpers shared by the ledger integration tests (imported, not collected)."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from multiprocessing.process import BaseProcess
from typing import Any

import pytest
from sqlalchemy import select, text

import pipeline
from pipeline.cli import run
from pipeline.db.store import Store
from schemas.facts import Fact
from tests.factories import put_fact

LEDGER_TABLES = ("facts", "claims", "events")
# What a writer process needs, imported once by the fork server rather than by each child.
WRITER_MODULES = ["pipeline", "pipeline.db.store", "pipeline.settings", "pytest", "tests.factories"]


def writer_processes() -> multiprocessing.context.ForkServerContext:
    """Where concurrent writer processes come from: forked from one server process that has
    imported the pipeline (a spawned child imports it again, about a second of CPU each),
    never from the test process, whose threads and open connections a fork would copy."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WRITER_MODULES)  # ignored once the server runs
    return context


def utc(text_value: str) -> datetime:
    """An aware UTC datetime from RFC 3339 text."""
    return datetime.fromisoformat(text_value).astimezone(UTC)


def count_rows(store: Store, table: str, **where: str) -> int:
    clause = " AND ".join(f"{column} = :{column}" for column in where) or "1 = 1"
    with store.engine.connect() as connection:
        value = connection.execute(
            text(f"SELECT count(*) FROM {table} WHERE {clause}"), where
        ).scalar_one()
    return int(value)


def ledger_counts(store: Store, **where: str) -> dict[str, int]:
    return {table: count_rows(store, table, **where) for table in LEDGER_TABLES}


def put(store: Store, key: Mapping[str, Any], **fields: Any) -> pipeline.PutResult:
    """`pipeline.put` of `key` and `fields`, the rest from the shared defaults."""
    return put_fact(store, **{**key, **fields})


def one_at(store: Store, key: Mapping[str, Any], at: str, known_at: str | None = None) -> Fact:
    query = {**key, "at": at, "known_at": known_at}
    (fact,) = pipeline.get(store, query)
    return fact


def timeline(facts: list[Fact]) -> list[tuple[str, str | None, Any]]:
    """(valid_from, valid_to, value) of each fact, with RFC 3339 text for readability."""
    return [
        (
            fact.valid_from.isoformat(),
            fact.valid_to.isoformat() if fact.valid_to is not None else None,
            fact.value,
        )
        for fact in facts
    ]


def assert_no_overlap(facts: list[Fact]) -> None:
    ordered = sorted(facts, key=lambda fact: fact.valid_from)
    for fact in ordered:
        assert fact.valid_to is None or fact.valid_from < fact.valid_to
    for before, after in zip(ordered, ordered[1:], strict=False):
        assert before.valid_to is not None, f"{before.fact_id} is open but {after.fact_id} follows"
        assert before.valid_to <= after.valid_from


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = run(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code, out, err = cli(capsys, *args, "--json")
    assert out, f"no output; stderr: {err}"
    return code, json.loads(out)


def all_rows(store: Store) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table, in insertion order (surrogate ids left out), read on a
    connection of its own."""
    from pipeline.db.models import Base

    tables: dict[str, list[dict[str, Any]]] = {}
    with store.reading() as connection:
        for table in Base.metadata.sorted_tables:
            surrogate = [column for column in table.primary_key if column.autoincrement is True]
            order = surrogate or list(table.primary_key)
            columns = [column for column in table.columns if column not in surrogate]
            rows = connection.execute(select(*columns).order_by(*order))
            tables[table.name] = [dict(row._mapping) for row in rows]
    return tables


def stop_writers(processes: Sequence[BaseProcess]) -> None:
    """Join writer processes, killing one that hangs."""
    for process in processes:
        process.join(timeout=60)
        if process.is_alive():
            process.kill()
            process.join()


def text_columns(store: Store) -> list[tuple[str, str]]:
    """(table, column) of every column that can hold text, from the database catalogue. SQLite
    types loosely, so every column of every table is searched there."""
    with store.engine.connect() as connection:
        if store.is_postgres:
            found = connection.execute(
                text(
                    "SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND data_type IN "
                    "('text', 'character varying', 'character', 'json', 'jsonb')"
                )
            )
            return [(table, column) for table, column in found]
        tables = connection.execute(
            text("SELECT name FROM sqlite_master WHERE type = 'table'")
        ).scalars()
        return [
            (table, column[1])
            for table in list(tables)
            for column in connection.execute(text(f'PRAGMA table_info("{table}")'))
        ]


def occurrences(store: Store, needle: str) -> dict[str, int]:
    """`table.column` -> number of rows whose text contains `needle`, for every hit."""
    hits: dict[str, int] = {}
    with store.engine.connect() as connection:
        for table, column in text_columns(store):
            found = connection.scalar(
                text(
                    f'SELECT count(*) FROM "{table}" WHERE CAST("{column}" AS TEXT) LIKE :pattern'
                ),
                {"pattern": f"%{needle}%"},
            )
            if found:
                hits[f"{table}.{column}"] = int(found)
    return hits
