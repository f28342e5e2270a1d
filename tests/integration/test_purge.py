"""Purge leaves nothing from which an erased value can be recovered: no hash of it in any
column (values from small domains — dates, booleans, enums, small numbers — would otherwise be
found by hashing every candidate), and no copy of it in the database files."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

import pipeline
from pipeline.db.models import Base
from pipeline.db.store import Store, open_store
from pipeline.ledger.events import content_hash
from pipeline.settings import Settings
from schemas.commands import PutFact
from tests.factories import FrozenClock, fact_command

TENANT, SUBJECT = "acme", "mira"

# Every value each attribute's type allows, as an attacker with the purged database would try.
DOMAINS: dict[str, list[Any]] = {
    "birthday": [
        (date(1900, 1, 1) + timedelta(days=day)).isoformat()
        for day in range((date(2030, 12, 31) - date(1900, 1, 1)).days + 1)
    ],
    "newsletter_opt_in": [True, False],
    "answer_style": ["concise", "detailed"],
    "monthly_budget": list(range(0, 10_001)),
    "languages": [
        a + b for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"
    ],
}
WRITES: list[dict[str, Any]] = [
    {"attribute": "birthday", "value": "1987-04-12", "idempotency_key": "k-birthday"},
    {"attribute": "birthday", "value": "1987-04-21", "valid_from": "2026-03-01T00:00:00Z"},
    {"attribute": "newsletter_opt_in", "value": True, "idempotency_key": "k-news"},
    {"attribute": "answer_style", "value": "concise"},
    {"attribute": "answer_style", "value": "concise", "valid_from": "2026-02-01T00:00:00Z"},
    {"attribute": "monthly_budget", "value": 4711, "idempotency_key": "k-budget"},
    {"attribute": "monthly_budget", "value": 17, "trust": "untrusted"},
    {"attribute": "languages", "value": "de", "idempotency_key": "k-lang"},
]


def _command(write: dict[str, Any]) -> dict[str, Any]:
    return fact_command(tenant_id=TENANT, subject=SUBJECT, source_episode_id="e1") | write


def _hash(value: Any) -> str:
    return content_hash(value)  # sha256 of the canonical JSON, as the ledger hashes values


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _every_string(store: Store) -> set[str]:
    """Every string in every column of every table, JSON documents opened up."""
    found: set[str] = set()
    with store.reading() as connection:
        for table in Base.metadata.sorted_tables:
            for row in connection.execute(select(table)):
                found.update(_strings(list(row)))
    return found


def _candidate_hashes(events_before: list[pipeline.LoggedDecision]) -> set[str]:
    """What an attacker could compute for each candidate value: the value's hash, the hash of
    each keyed command with that value, and each logged decision's hash with that value."""
    candidates: set[str] = set()
    for write in WRITES:
        domain = DOMAINS[write["attribute"]]
        candidates.update(_hash(value) for value in domain)
        if "idempotency_key" in write:
            fields = PutFact.model_validate(_command(write)).model_dump(mode="json")
            del fields["idempotency_key"]
            candidates.update(_hash(fields | {"value": value}) for value in domain)
    for event in events_before:
        claim = (event.command or {}).get("claim")
        if claim is None:
            continue
        for value in DOMAINS[claim["attribute"]]:
            guessed = claim | {"value": value, "value_hash": _hash(value)}
            digest = {"decision": event.kind, "fact_ids": event.fact_ids}
            candidates.add(_hash(digest | {"command": event.command | {"claim": guessed}}))
    return candidates


@pytest.mark.slow
def test_after_purge_no_column_holds_a_hash_of_any_candidate_value(
    clocked_store: Store, clock: FrozenClock
) -> None:
    store = clocked_store
    for write in WRITES:
        pipeline.put(store, _command(write))
    with pytest.raises(pipeline.FactConflict):  # a refusal is logged with its claim
        pipeline.put(store, _command({"attribute": "birthday", "value": "1987-04-13"}))
    clock.set(clock.now + timedelta(days=3000))
    assert pipeline.expire(store, {"tenant_id": TENANT}).expired_fact_ids  # languages: a slot
    events_before = pipeline.decision_log(
        store, {"tenant_id": TENANT, "limit": 1000, "oldest_first": True}
    )
    candidates = _candidate_hashes(events_before)
    # The check can fail: before the purge the stored hashes are among the candidates.
    assert _every_string(store) & candidates

    pipeline.forget(store, {"tenant_id": TENANT, "subject": SUBJECT, "purge": True})

    stored = _every_string(store)
    assert not stored & candidates
    for value in ("1987-04-12", "1987-04-21", "1987-04-13", "concise", "de"):
        assert value not in stored


def test_a_repeated_key_after_a_purge_finds_its_fact_gone_and_a_changed_one_conflicts(
    store: Store,
) -> None:
    command = _command(WRITES[0])
    first = pipeline.put(store, command)
    pipeline.forget(store, {"tenant_id": TENANT, "subject": SUBJECT, "purge": True})

    with pytest.raises(pipeline.NotFound, match=first.fact.fact_id):
        pipeline.put(store, command)
    with pytest.raises(pipeline.IdempotencyConflict):
        pipeline.put(store, command | {"source_episode_id": "another"})


# -- on disk ---------------------------------------------------------------------------------

MARK = "PURGEDMARK"


def _write_marked(store: Store, count: int) -> list[str]:
    marks = [f"{MARK}-{uuid.uuid4().hex[:10]}" for _ in range(count)]
    for index, mark in enumerate(marks):
        pipeline.put(
            store,
            {
                "tenant_id": TENANT,
                "subject": SUBJECT,
                "attribute": "open_cases",
                "value": f"{mark}-value",
                "evidence": f"{mark}-evidence",
                "valid_from": f"2026-01-{index % 28 + 1:02d}T00:00:00Z",
                "source_episode_id": f"e{index}",
                "idempotency_key": f"key-{index}",
            },
        )
    return marks


def _columns_holding(store: Store, mark: str) -> list[str]:
    """Every table.column of the schema whose stored text (JSON included) contains the mark."""
    found = []
    with store.begin() as unit:
        for table in Base.metadata.sorted_tables:
            for row in unit.session.execute(select(table)).mappings():
                found += [f"{table.name}.{name}" for name, cell in row.items() if mark in str(cell)]
    return sorted(set(found))


def test_purge_erases_free_text_that_quotes_a_value(store: Store) -> None:
    """A reviewer's reason and a refusal's message are text about the subject: they may quote
    its values, so a purge erases them as it erases values and evidence."""
    mark = f"{MARK}-{uuid.uuid4().hex[:10]}"
    quarantined = pipeline.put(
        store,
        {
            "tenant_id": TENANT,
            "subject": SUBJECT,
            "attribute": "open_cases",
            "value": "case 7",
            "valid_from": "2026-01-01T00:00:00Z",
            "source_episode_id": "tool-1",
            "trust": "untrusted",
        },
    )
    reason = f"the tool said {mark}, which the customer denied"
    pipeline.dismiss(
        store,
        {
            "tenant_id": TENANT,
            "fact_id": quarantined.fact.fact_id,
            "reason": reason,
            "idempotency_key": "dismiss-1",
        },
    )
    assert _columns_holding(store, mark), "the reason is logged before the purge"

    pipeline.forget(store, {"tenant_id": TENANT, "subject": SUBJECT, "purge": True})

    assert _columns_holding(store, mark) == []


def test_sqlite_purge_leaves_no_value_in_the_files_with_another_connection_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "purge.sqlite3"
    store = open_store(Settings(database_url=f"sqlite:///{path}"))
    _write_marked(store, 17)
    other = sqlite3.connect(path)  # another process's connection, idle after a read
    other.execute("SELECT count(*) FROM facts").fetchone()
    try:
        files = [path, path.with_name(path.name + "-wal")]
        assert any(MARK.encode() in file.read_bytes() for file in files if file.exists())

        result = pipeline.forget(store, {"tenant_id": TENANT, "subject": SUBJECT, "purge": True})

        assert result.files_scrubbed is True
        for file in [*files, path.with_name(path.name + "-shm")]:
            if file.exists():
                assert MARK.encode() not in file.read_bytes(), file.name
    finally:
        other.close()
        store.dispose()


@pytest.mark.postgres
def test_postgres_purge_vacuum_leaves_no_value_in_the_table_files(postgres_url: str) -> None:
    from tests.databases import empty_database

    empty_database(postgres_url)
    store = open_store(Settings(database_url=postgres_url))
    try:
        _write_marked(store, 17)
        result = pipeline.forget(store, {"tenant_id": TENANT, "subject": SUBJECT, "purge": True})
        assert result.files_scrubbed is False  # old row versions wait for the vacuum

        # Another database's transactions may still be open on a shared server: the vacuum
        # waits for them (bounded), so what it rewrote cannot still hold the purged rows.
        store.vacuum(wait_s=120)

        assert _pages_holding(store, MARK) == []
    finally:
        store.dispose()


@pytest.mark.postgres
def test_postgres_purge_vacuum_names_an_old_transaction_and_rewrites_nothing(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli import run
    from tests.databases import empty_database

    empty_database(postgres_url)
    store = open_store(Settings(database_url=postgres_url))
    # A report's transaction that began before the purge: its snapshot still sees the rows.
    reader = store.engine.connect().execution_options(isolation_level="REPEATABLE READ")
    try:
        _write_marked(store, 3)
        reader.execute(text("SELECT count(*) FROM facts")).scalar_one()
        pid = reader.execute(text("SELECT pg_backend_pid()")).scalar_one()
        pipeline.forget(store, {"tenant_id": TENANT, "subject": SUBJECT, "purge": True})
        monkeypatch.setenv("SGAM_DATABASE_URL", postgres_url)

        code = run(["purge-vacuum", "--wait", "0.5"])

        err = capsys.readouterr().err
        assert code == 5
        assert err.count("\n") == 1
        assert err.startswith("sgam: PurgeBlocked: ")
        assert f"pid {pid} (database " in err
        assert "rewrote nothing" in err
        assert "SELECT" not in err  # never the query text
        assert _pages_holding(store, MARK), "nothing was rewritten: the old rows are there"
    finally:
        reader.close()
    try:
        store.vacuum(wait_s=120)  # the transaction ended: now it goes through
        assert _pages_holding(store, MARK) == []
    finally:
        store.dispose()


def _pages_holding(store: Store, needle: str) -> list[str]:
    """(table, page) of every page of every table and its TOAST table that holds `needle`,
    read raw through pageinspect, dead row versions included."""
    hits: list[str] = []
    with store.engine.begin() as connection:
        connection.execute(text("CREATE EXTENSION IF NOT EXISTS pageinspect"))
        relations = connection.execute(
            text(
                "SELECT c.relname, c.oid::regclass::text FROM pg_class c WHERE c.relname = ANY(:t) "
                "UNION SELECT c.relname || ' (toast)', t.oid::regclass::text FROM pg_class c "
                "JOIN pg_class t ON t.oid = c.reltoastrelid WHERE c.relname = ANY(:t)"
            ),
            {"t": [table.name for table in Base.metadata.sorted_tables]},
        ).all()
        for name, relation in relations:
            pages = connection.execute(
                text("SELECT pg_relation_size(CAST(:r AS regclass)) / 8192"), {"r": relation}
            ).scalar_one()
            for page in range(pages):
                raw = connection.execute(
                    text("SELECT get_raw_page(:r, :p)"), {"r": relation, "p": page}
                ).scalar_one()
                if needle.encode() in bytes(raw):
                    hits.append(f"{name} page {page}")
    return hits
