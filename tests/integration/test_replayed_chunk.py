"""A `put_many` chunk whose every key was used before (an `sgam import` re-run): the first
answers again, nothing written, each line whose fact was forgotten since refused — and the
chunk costs the same few statements whatever its length, counted by the driver (a libpq trace
on PostgreSQL, SQLite's trace callback), not timed. A replay that asked per line whether its
fact was forgotten made a re-run of 100,000 lines 5.7x slower."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event

import pipeline
from pipeline.db import replan
from pipeline.db.store import Store
from pipeline.errors import NotFound
from pipeline.ledger.forget import forget
from tests.factories import fact_command
from tests.integration.ledger_helpers import ledger_counts


def _commands(count: int, tenant: str = "acme", prefix: str = "c") -> list[dict[str, Any]]:
    return [
        fact_command(
            tenant_id=tenant,
            subject=f"{prefix}-{n // 2}",
            attribute=("home_city", "employer")[n % 2],
            value=f"value {n}",
            idempotency_key=f"{prefix}-key-{n}",
        )
        for n in range(count)
    ]


class Statements:
    """What the server is sent on the store's connections, from the driver itself: requests
    the client waits on (a simple Query or an extended-protocol Sync, on PostgreSQL) and
    statements (a Query or an Execute; on SQLite each statement the trace callback reports)."""

    _REQUEST = re.compile(r"^F\t\d+\t(Query|Sync)\b", re.MULTILINE)
    _STATEMENT = re.compile(r"^F\t\d+\t(Query|Execute)\b", re.MULTILINE)

    def __init__(self, store: Store) -> None:
        self.postgres = store.backend.name == "postgresql"
        self.trace = tempfile.NamedTemporaryFile("w+", suffix=".pqtrace")  # noqa: SIM115
        self.sqlite: list[str] = []
        self.store = store

    def attach(self, dbapi: Any, _record: object) -> None:
        if self.postgres:
            from psycopg import pq

            dbapi.pgconn.trace(self.trace.fileno())
            dbapi.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        else:
            dbapi.set_trace_callback(self.sqlite.append)

    def count(self) -> tuple[int, int]:
        """(requests, statements) so far."""
        if not self.postgres:
            return len(self.sqlite), len(self.sqlite)
        self.trace.flush()
        text = Path(self.trace.name).read_text(errors="replace")
        return len(self._REQUEST.findall(text)), len(self._STATEMENT.findall(text))

    @contextmanager
    def counting(self) -> Iterator[Statements]:
        # New connections, each traced from its first statement; the re-plan check (at most
        # one query a second at checkout, outside the chunk's transaction) is left out.
        self.store.engine.dispose()
        event.listen(self.store.engine, "connect", self.attach)
        postgres = self.postgres
        if postgres:
            event.remove(self.store.engine, "checkout", replan.on_checkout)
        try:
            yield self
        finally:
            event.remove(self.store.engine, "connect", self.attach)
            if postgres:
                event.listen(self.store.engine, "checkout", replan.on_checkout)
            self.store.engine.dispose()
            self.trace.close()


def _replay_cost(store: Store, commands: list[dict[str, Any]]) -> tuple[int, int]:
    """Requests and statements of `commands` replayed in one chunk, once connected."""
    with Statements(store).counting() as traced:
        pipeline.put_many(store, commands[:1])  # connects (and prepares nothing yet)
        before = traced.count()
        outcomes = pipeline.put_many(store, commands, chunk=len(commands))
        after = traced.count()
    assert all(isinstance(o, pipeline.PutResult) and o.replayed for o in outcomes)
    return after[0] - before[0], after[1] - before[1]


def test_a_replayed_chunk_costs_the_same_statements_whatever_its_length(store: Store) -> None:
    short, long = _commands(8, prefix="s"), _commands(200, prefix="l")
    for commands in (short, long):
        assert all(o.written for o in pipeline.put_many(store, commands, chunk=len(commands)))
    written = ledger_counts(store)

    short_cost, long_cost = _replay_cost(store, short), _replay_cost(store, long)

    assert ledger_counts(store) == written  # a replay writes nothing
    assert long_cost == short_cost, f"8 lines: {short_cost}, 200 lines: {long_cost}"
    requests, statements = long_cost
    # (PostgreSQL: BEGIN; the locks and reads, one pipeline; the forgotten; COMMIT: 4 / 8.
    # SQLite: 6 statements.)
    assert requests <= 6, long_cost
    assert statements <= 8, long_cost


def test_a_replayed_chunk_refuses_only_the_lines_whose_fact_was_forgotten(store: Store) -> None:
    # Two tenants with the same subjects: a forget in one hides nothing of the other's.
    acme, globex = _commands(12), _commands(12, tenant="globex")
    first = pipeline.put_many(store, acme + globex)
    forget(store, {"tenant_id": "acme", "subject": "c-2"})
    repeat = acme[5] | {"valid_from": "2026-01-01T01:00:00+01:00"}  # the same instant
    written = ledger_counts(store)

    # One chunk: every key stored, and a key repeated inside the chunk after its fact was
    # forgotten; then one key per chunk, as a single put would replay it.
    for chunk in (None, 1):
        again = pipeline.put_many(store, [*acme, *globex, repeat], chunk=chunk)

        forgotten = [n for n, o in enumerate(again) if isinstance(o, NotFound)]
        assert forgotten == [4, 5, 24], chunk  # acme's c-2: both its attributes, and the repeat
        for n, (before, after) in enumerate(zip(first, again[:24], strict=True)):
            if n not in forgotten:
                assert isinstance(before, pipeline.PutResult)
                assert isinstance(after, pipeline.PutResult)
                assert (after.fact, after.replayed) == (before.fact, True)
        assert ledger_counts(store) == written


def test_a_key_first_used_in_the_chunk_answers_its_fact_again(store: Store) -> None:
    """A key's answer the batch itself kept (not read with the stored keys) replays too."""
    command = _commands(1)[0]
    stored = _commands(3, prefix="o")
    pipeline.put_many(store, stored)

    outcomes = pipeline.put_many(store, [*stored, command, command], chunk=5)

    first, again = outcomes[3], outcomes[4]
    assert isinstance(first, pipeline.PutResult)
    assert isinstance(again, pipeline.PutResult)
    assert first.written
    assert (again.fact, again.replayed) == (first.fact, True)


def test_the_count_grows_with_the_work_it_counts(store: Store) -> None:
    """The counter can fail: three single puts are sent at least a statement each."""
    with Statements(store).counting() as traced:
        pipeline.put_many(store, _commands(1, prefix="w"))
        before = traced.count()
        for command in _commands(3, prefix="x"):
            pipeline.put(store, command)
        after = traced.count()
    assert after[1] - before[1] >= 3
