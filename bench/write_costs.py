"""The client CPU of two steps of a put, each timed alone (best of 7 runs, so a loaded machine
inflates it least): psycopg converting the combined INSERT of claim, fact and decision written
in `%s` placeholders (as it was: psycopg parses a statement of more than 50 parameters again on
every execution) against the same statement in `$n` for its raw cursor (as it is), and a
decision's payload encoded to JSON by psycopg against its canonical text sent as it is.

    .venv/bin/python bench/write_costs.py            # needs no database
    .venv/bin/python bench/write_costs.py --runs 500
"""

from __future__ import annotations

import argparse
import re
import tempfile
import timeit
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from environment import describe, machine_load, use_support_catalog
from figures import print_table
from psycopg._queries import PostgresQuery, PostgresRawQuery
from psycopg.adapt import PyFormat, Transformer
from psycopg.types.json import Jsonb

from pipeline import Settings, Store
from pipeline.db import inserts
from pipeline.db.models import ClaimRow, EventRow, FactRow
from pipeline.ledger.write import resolve
from schemas.commands import PutFact
from schemas.events import ClaimPayload
from schemas.fields import canonical_json


def best_us(call: Callable[[], object], runs: int) -> float:
    """Microseconds per call, the best of 7 timings of `runs` calls."""
    return min(timeit.repeat(call, number=runs, repeat=7)) / runs * 1e6


def statement_costs(runs: int) -> tuple[float, float, int]:
    """Converting a put's combined INSERT in `%s` and in `$n` placeholders; its parameters."""
    columns = [tuple(c.name for c in table.__table__.columns) for table in (ClaimRow, FactRow)]
    events = tuple(c.name for c in EventRow.__table__.columns if c.name != "event_id")
    shape = tuple(
        (table, 1, names)
        for table, names in zip((ClaimRow, FactRow, EventRow), [*columns, events], strict=True)
    )
    raw = inserts._combined(shape)
    percent = re.sub(r"\$\d+", "%s", raw)
    params: list[Any] = [None] * sum(len(names) for _, _, names in shape)
    transformer = Transformer()

    def convert(kind: type[PostgresQuery], statement: str) -> None:
        kind(transformer).convert(statement, params)

    before = best_us(lambda: convert(PostgresQuery, percent), runs)
    after = best_us(lambda: convert(PostgresRawQuery, raw), runs)
    return before, after, len(params)


def payload_costs(runs: int) -> tuple[float, float]:
    """psycopg encoding a decision's payload (a resolved claim) against sending its text."""
    with tempfile.TemporaryDirectory() as scratch:
        store = Store(Settings(database_url=f"sqlite:///{Path(scratch) / 'costs.sqlite3'}"))
        store.upgrade()
        command = PutFact(
            tenant_id="t",
            subject="ana",
            attribute="home_city",
            value="Zürich",
            valid_from=datetime(2026, 1, 1, tzinfo=UTC),
            source_episode_id="e",
        )
        with store.begin() as unit:
            claim = resolve(unit, command, claim_id="c-1", now=datetime.now(UTC))
        store.dispose()
    payload = ClaimPayload(claim=claim).model_dump(mode="json")
    text = canonical_json(payload)
    dumper = Transformer().get_dumper(Jsonb(payload), PyFormat.TEXT)
    before = best_us(lambda: dumper.dump(Jsonb(payload)), runs)
    after = best_us(lambda: dumper.dump(Jsonb(text, dumps=inserts._as_is)), runs)
    return before, after


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="calls per timing (7 timings)")
    args = parser.parse_args(argv)
    use_support_catalog()
    for line in describe():
        print(line)
    print(f"({machine_load()} before)")
    before, after, params = statement_costs(args.runs)
    encoded, sent = payload_costs(args.runs)
    print_table(
        ["step", "before (us)", "after (us)"],
        [
            [f"convert the combined INSERT ({params} parameters)", f"{before:.1f}", f"{after:.1f}"],
            ["a decision's payload to JSONB", f"{encoded:.1f}", f"{sent:.1f}"],
        ],
    )
    print(f"({machine_load()} after)")


if __name__ == "__main__":
    main()
