"""Benchmark the SGAM ledger on Postgres: put() throughput and get() latency against plain SQL.

Write throughput compares `pipeline.put` with a plain parameterised INSERT (psycopg, one row per
transaction, into the real `facts` table) in the same run, sequentially and with concurrent
writer processes; then `pipeline.put_many` of 1,000 commands per transaction with the same rows
by executemany, and `sgam import` of a 100,000-line file end to end. Read latency loads N facts
by COPY, then times `pipeline.get` (current, `at=`, `known_at=`) against a hand-written SELECT
of the same rows over psycopg.

    .venv/bin/python bench/ledger.py            # full run: 1,000,000 facts, 3,000 puts
    .venv/bin/python bench/ledger.py --quick    # a smoke run of about a minute

The database named by --url (or SGAM_BENCH_URL) is dropped and recreated on every run.
Each benchmark is a module of its own: ledger_reads, ledger_writes (put and put_many, run by
write_runs), ledger_import and round_trips; plain_sql is the baseline, ledger_load the bulk
load, environment what every benchmark reports about the machine and its load. See
bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from environment import describe, use_support_catalog
from figures import print_table
from ledger_import import report_import
from ledger_reads import report_reads
from ledger_writes import report_batches, report_writes
from round_trips import count_round_trips
from scratch_databases import drop, recreate
from sqlalchemy import make_url

from pipeline import Settings, Store

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench"


def recreate_database(url: str) -> None:
    """Drop and create the benchmark database, then migrate it the way operators do."""
    recreate(url)
    store = Store(Settings(database_url=url))
    store.upgrade()
    store.dispose()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with --quick applied."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("SGAM_BENCH_URL", DEFAULT_URL))
    parser.add_argument("--facts", type=int, default=1_000_000, help="rows bulk-loaded for reads")
    parser.add_argument("--puts", type=int, default=3000, help="timed writes per mode per test")
    parser.add_argument("--writers", type=int, default=4, help="concurrent writer processes")
    parser.add_argument("--lookups", type=int, default=2000, help="timed lookups per read kind")
    parser.add_argument("--warmup", type=int, default=200, help="untimed operations first")
    parser.add_argument("--rounds", type=int, default=2, help="alternating plain/put phases")
    parser.add_argument("--depth", type=int, default=3, help="supersessions per key")
    parser.add_argument("--batch", type=int, default=1000, help="writes per put_many call")
    parser.add_argument(
        "--batch-puts", type=int, default=20_000, help="timed batched writes per mode per test"
    )
    parser.add_argument(
        "--import-lines", type=int, default=100_000, help="lines of the sgam import file (0: skip)"
    )
    parser.add_argument("--skip-batch", action="store_true", help="no put_many or import tests")
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--quick", action="store_true", help="small scale smoke run")
    parser.add_argument("--skip-reads", action="store_true")
    parser.add_argument("--skip-writes", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args(argv)
    if args.quick:
        args.facts, args.puts, args.lookups, args.warmup = 50_000, 400, 300, 30
        args.batch_puts, args.import_lines = 4000, 10_000
    return args


def report_cpu(reads: dict[str, float], writes: dict[str, dict[str, float]]) -> None:
    """Client CPU per call: the Python cost of each path, which competing load barely moves."""
    rows = [
        [
            label,
            f"{costs['put']:.3f}",
            f"{costs['plain']:.3f}",
            f"{costs['put'] / costs['plain']:.1f}x",
        ]
        for label, costs in (
            ("put, new key", writes.get("distinct")),
            ("put, supersede", writes.get("supersede")),
            ("put_many, new key", writes.get("distinct batch")),
            ("put_many, supersede", writes.get("supersede batch")),
        )
        if costs
    ]
    if reads:
        rows.append(
            [
                "get (all kinds)",
                f"{reads['get']:.3f}",
                f"{reads['raw']:.3f}",
                f"{reads['get'] / reads['raw']:.1f}x",
            ]
        )
    if rows:
        print("\nClient CPU per call in ms (1 writer; this process only, not the server)")
        print_table(["operation", "SGAM", "plain SQL", "SGAM/plain"], rows)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the whole benchmark and print its tables."""
    args = parse_args(argv)
    use_support_catalog()
    started = time.perf_counter()
    print(f"SGAM ledger benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {make_url(args.url)}")
    recreate_database(args.url)
    for line in describe(args.url):
        print(line)
    catalog_store = Store(Settings(database_url=args.url))
    catalog = catalog_store.catalog
    catalog_store.dispose()
    reads = writes = None
    if not args.skip_reads and args.facts > 0:
        reads = report_reads(args.url, catalog, args)
    if not args.skip_writes:
        writes = report_writes(args.url, args)
        if not args.skip_batch:
            batches = report_batches(args.url, args)
            writes |= {f"{scenario} batch": cpu for scenario, cpu in batches.items()}
            if args.import_lines > 0:
                report_import(args.url, args.import_lines)
    report_cpu(reads or {}, writes or {})
    print("\nClient round trips and statements per operation (libpq trace, after warm-up)")
    trips = count_round_trips(args.url)
    print_table(
        ["operation", "round trips", "statements"],
        [[name, f"{n:.1f}", f"{k:.1f}"] for name, (n, k) in trips.items()],
    )
    if not args.keep:
        drop(args.url)
    print(f"\ntotal runtime {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
