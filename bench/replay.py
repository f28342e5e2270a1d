"""Replay benchmark: rebuild a ledger from a decision log of N events and compare the result.

    .venv/bin/python bench/replay.py [--events 100000] [--url postgresql+psycopg://...]

Fills a fresh database with a realistic mix through the public API (new facts, corrections
that close intervals, late facts, restatements), then replays its log into a second fresh
database, checks that both ledgers are equal row for row, and prints the rates. The baseline is
the rate at which the same log was written live in this run.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import time
from datetime import UTC, datetime, timedelta

from environment import describe, machine_load, use_support_catalog
from sqlalchemy import create_engine, func, make_url, select, text

import pipeline
from pipeline.db.models import FACT_COLUMNS, EventRow, FactRow
from pipeline.db.store import Store
from pipeline.rebuild import replay
from pipeline.settings import Settings

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_replay"
START = datetime(2026, 1, 1, tzinfo=UTC)


def fresh(url: str) -> Store:
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        admin = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)'))
            connection.execute(text(f'CREATE DATABASE "{parsed.database}"'))
        admin.dispose()
    store = Store(Settings(database_url=url))
    store.upgrade()
    return store


def workload(store: Store, events: int, seed: int) -> float:
    """Write until the log holds `events` events; returns the seconds it took."""
    rng = random.Random(seed)
    subjects = [f"user-{n}" for n in range(max(1, events // 20))]
    started = time.perf_counter()
    written = puts = 0
    while written < events:
        subject = rng.choice(subjects)
        day = rng.randrange(300)
        fact = {
            "tenant_id": f"tenant-{rng.randrange(10)}",
            "subject": subject,
            "attribute": rng.choice(["home_city", "employer", "answer_style"]),
            "valid_from": (START + timedelta(days=day)).isoformat(),
            "source_episode_id": f"ep-{puts}",
        }
        fact["value"] = (
            rng.choice(["concise", "detailed"])
            if fact["attribute"] == "answer_style"
            else rng.choice(["Utrecht", "Leiden", "Delft", "Acme", "Initech"])
        )
        # A conflict or reject is logged as an event too, which is all the log needs here.
        with contextlib.suppress(pipeline.ConflictError):
            pipeline.put(store, fact)
        puts += 1
        if puts % 5000 == 0 and store.is_postgres:
            store.analyze()  # what autovacuum would do; it is off on the benchmark machine
        if puts % 500 == 0 or events - written < 1000:
            with store.begin() as unit:
                session = unit.session
                written = session.scalar(select(func.count()).select_from(EventRow)) or 0
    return time.perf_counter() - started


def ledger(store: Store) -> list[tuple[object, ...]]:
    columns = [getattr(FactRow, name) for name in FACT_COLUMNS]
    with store.begin() as unit:
        session = unit.session
        return [
            tuple(row)
            for row in session.execute(select(*columns).order_by(FactRow.fact_id, FactRow.version))
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    use_support_catalog()

    source = fresh(args.url)
    for line in describe(args.url):
        print(line)
    print(f"({machine_load()} before)")
    target_url = args.url + "_copy" if "postgresql" in args.url else args.url + ".copy"
    target = fresh(target_url)
    written_in = workload(source, args.events, args.seed)
    with source.begin() as unit:
        session = unit.session
        events = session.scalar(select(func.count()).select_from(EventRow)) or 0
    report = replay(source, target)
    equal = ledger(source) == ledger(target)

    print(f"events in the log          {events:>10,}")
    print(f"facts rows (all versions)  {len(ledger(target)):>10,}")
    print(
        f"written live in            {written_in:>10.1f} s  ({events / written_in:,.0f} events/s)"
    )
    print(
        f"replayed in                {report.seconds:>10.1f} s  "
        f"({events / report.seconds:,.0f} events/s)"
    )
    print(f"replay / live rate         {written_in / report.seconds:>10.2f}x")
    print(f"rebuilt ledger equal       {equal!s:>10}")
    print(f"({machine_load()} after)")
    source.dispose()
    target.dispose()
    if not equal:
        raise SystemExit("replayed ledger differs from the live one")


if __name__ == "__main__":
    main()
