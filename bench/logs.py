"""What the structured logs cost: every LoCoMo turn (5,882, read where the data lies) through
inline intake and processing (the rules extractor, the policy, the ledger on embedded SQLite,
a new file each run) with
logging as a quiet worker has it (level warning: no line per episode), and at level info in
the text and the JSON format (a line per episode and per intake, written to /dev/null); then
the cost of formatting one episode's line in each format.

    .venv/bin/python bench/logs.py [--rounds 2] [--locomo PATH]

The three settings run in turns, `--rounds` times each, so that a change in the machine's load
falls on all three alike; each setting's figure is its best round, and the ratios are against
the warning-level baseline of the same run. (SQLite: on PostgreSQL the inline run of the whole
backlog currently fails with psycopg's "prepared statement does not exist".)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import timeit
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from environment import describe, machine_load, use_support_catalog
from pipeline_flow import LOCOMO, locomo_lines

import pipeline
from pipeline.db.store import open_store
from pipeline.logs import LogFormat, configure, formatter
from pipeline.settings import Settings

SETTINGS: list[tuple[str, LogFormat, str]] = [
    ("warning (baseline)", "text", "WARNING"),
    ("info, text", "text", "INFO"),
    ("info, json", "json", "INFO"),
]


def inline_run(
    directory: Path, lines: list[dict[str, Any]], log_format: LogFormat, level: str
) -> float:
    """Episodes a second, intake to the last episode done, with the logs going to /dev/null."""
    path = directory / f"{uuid.uuid4().hex}.sqlite3"
    store = open_store(Settings(database_url=f"sqlite:///{path}"))
    store.upgrade()
    stderr = sys.stderr
    with open(os.devnull, "w") as sink:
        sys.stderr = sink  # SGAM's handler writes to whatever sys.stderr is
        configure(log_format, level)
        try:
            started = time.perf_counter()
            report = pipeline.ingest(store, lines)
            elapsed = time.perf_counter() - started
        finally:
            configure("text", "WARNING")
            sys.stderr = stderr
            store.dispose()
            path.unlink()
    assert {r.status for r in report.receipts} == {"done"}
    return len(lines) / elapsed


def line_cost_us(log_format: LogFormat) -> float:
    """Microseconds to format one `episode processed` record (best of 5 runs of 20,000)."""
    record = logging.LogRecord(
        "sgam.episodes", logging.INFO, __file__, 1, "episode processed", None, None
    )
    fields = {
        "tenant": "locomo-conv-26",
        "episode_id": "conv-26:D1:3",
        "lane": "background",
        "outcome": "done",
        "extractor": "rules",
        "duration_ms": 0.412,
        "decisions": {"written": 1},
        "trace_id": "",
        "span_id": "",
    }
    record.__dict__.update(fields)
    shape = formatter(log_format)
    runs = timeit.repeat(lambda: shape.format(record), number=20_000, repeat=5)
    return min(runs) / 20_000 * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    args = parser.parse_args()
    use_support_catalog()
    lines = locomo_lines(args.locomo)
    print(f"SGAM logs benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {len(lines)} LoCoMo turns")
    for line in describe():
        print(line)
    print(f"({machine_load()} before)")
    rates: dict[str, list[float]] = {name: [] for name, _, _ in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="sgam-bench-logs-") as directory:
        for _ in range(args.rounds):
            for name, log_format, level in SETTINGS:
                rates[name].append(inline_run(Path(directory), lines, log_format, level))
    baseline = max(rates[SETTINGS[0][0]])
    print(f"{'inline, logging':<22}{'episodes/s':>12}{'vs baseline':>13}   rounds")
    for name, _, _ in SETTINGS:
        best = max(rates[name])
        rounds = ", ".join(f"{rate:.0f}" for rate in rates[name])
        print(f"{name:<22}{best:>12.1f}{best / baseline:>13.3f}   {rounds}")
    for log_format in ("text", "json"):
        print(f"one episode line, {log_format}: {line_cost_us(log_format):.1f} µs to format")
    print(f"({machine_load()} after)")


if __name__ == "__main__":
    main()
