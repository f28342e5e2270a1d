"""The write benchmarks: `pipeline.put` (one fact per transaction) and `pipeline.put_many`
(`--batch` per transaction) against the plain-SQL baseline writing the same `facts` rows, for
new keys and for supersessions, with 1 and `--writers` processes."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from environment import machine_load
from figures import print_table
from write_runs import WriteResult, run_writes

PUT_TARGET = 0.5  # put must reach at least half the plain INSERT rate
BATCH_RATE_TARGET = 5000  # put_many facts/s with one writer


def _write_tests(
    url: str, args: argparse.Namespace, cpu_ms: dict[str, dict[str, float]], *, batch: int
) -> Iterator[tuple[str, int, WriteResult]]:
    """Each write test in turn (new keys, then supersessions; 1 writer, then --writers), as
    (label, writers, result); the client CPU of the 1-writer runs goes into `cpu_ms`."""
    for scenario in ("distinct", "supersede"):
        for writers in sorted({1, args.writers}):
            result = run_writes(url, scenario, writers, args, batch=batch)
            if writers == 1:
                cpu_ms[scenario] = result.cpu_ms
            yield ("new keys" if scenario == "distinct" else "supersede"), writers, result


def report_writes(url: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Run every write test and print the table; return the sequential client CPU ms per write
    by scenario and mode."""
    print(
        f"\nWrite throughput in facts/s, {args.puts} timed writes per mode and row "
        "(plain = psycopg INSERT into facts, one transaction per fact)"
    )
    print(f"({machine_load()} before)")
    rows = []
    baseline: dict[int, float] = {}
    cpu_ms: dict[str, dict[str, float]] = {}
    for label, writers, result in _write_tests(url, args, cpu_ms, batch=1):
        plain, putr = result.rates["plain"], result.rates["put"]
        baseline.setdefault(writers, plain)  # the new-key INSERT rate
        rows.append(
            [
                label,
                str(writers),
                f"{plain:,.0f}",
                f"{putr:,.0f}",
                f"{putr / plain:.2f}x",
                f"{putr / baseline[writers]:.2f}x",
                f"{1000 * writers / putr:.2f}",
                "ok" if putr / plain >= PUT_TARGET else "MISSED",
            ]
        )
    headers = ["writes", "writers", "plain/s", "put/s", "put/plain", "put/INSERT", "ms/put"]
    print_table([*headers, f">={PUT_TARGET:g}x"], rows)
    print(f"({machine_load()} after)")
    return cpu_ms


def report_batches(url: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Run the put_many tests against executemany of the same rows and print the table;
    return the sequential client CPU ms per write by scenario and mode."""
    print(
        f"\nBatched write throughput in facts/s, {args.batch_puts} timed writes per mode and row, "
        f"{args.batch} per transaction (plain = the same facts rows by psycopg executemany)"
    )
    print(f"({machine_load()} before)")
    rows = []
    cpu_ms: dict[str, dict[str, float]] = {}
    for label, writers, result in _write_tests(url, args, cpu_ms, batch=args.batch):
        plain, putr = result.rates["plain"], result.rates["put"]
        rows.append(
            [
                label,
                str(writers),
                f"{plain:,.0f}",
                f"{putr:,.0f}",
                f"{putr / plain:.2f}x",
                f"{1000 * writers / putr:.3f}",
                "ok" if putr / plain >= PUT_TARGET else "MISSED",
                "-" if writers > 1 else "ok" if putr >= BATCH_RATE_TARGET else "MISSED",
            ]
        )
    headers = ["writes", "writers", "plain/s", "put_many/s", "put_many/plain", "ms/fact"]
    print_table([*headers, f">={PUT_TARGET:g}x", f">={BATCH_RATE_TARGET:,}/s"], rows)
    print(f"({machine_load()} after)")
    return cpu_ms
