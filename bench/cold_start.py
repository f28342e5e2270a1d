"""Start-up cost of the command line: wall time of whole `sgam` processes.

    .venv/bin/python bench/cold_start.py [--runs 15] [--postgres URL]  (creates the database)

Each command runs --runs times; the table shows the median and the fastest run, and each
median as a multiple of a bare interpreter start (`python -c pass`) measured in the same run.
Targets: `sgam --help` <= 0.2 s, `sgam get` <= 0.45 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from environment import describe, machine_load, use_support_catalog
from scratch_databases import create_if_missing

BIN = Path(sys.executable).parent
TARGETS = {"sgam --help": 0.2, "sgam get (SQLite)": 0.45, "sgam get (PostgreSQL)": 0.45}


def timed(command: list[str], env: dict[str, str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        # check: a command that fails fast would otherwise be timed as a fast start
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_cold"
    )
    args = parser.parse_args()
    use_support_catalog()
    sgam = str(BIN / "sgam")
    get = [sgam, "get", "--tenant", "acme", "--subject", "mira"]
    create_if_missing(args.postgres)
    for line in describe(args.postgres):
        print(line)
    print(f"({machine_load()} before)")
    with tempfile.TemporaryDirectory() as scratch:
        sqlite = {**os.environ, "SGAM_DATABASE_URL": f"sqlite:///{scratch}/cold.sqlite3"}
        postgres = {**os.environ, "SGAM_DATABASE_URL": args.postgres}
        seed = [sgam, "put", "--tenant", "acme", "--subject", "mira", "--attribute", "home_city"]
        seed += ["--value", "Berlin", "--valid-from", "2026-01-01", "--source", "ep-1"]
        seed += ["--idempotency-key", "cold-start-seed"]  # a re-run writes nothing new
        for env in (sqlite, postgres):
            subprocess.run([sgam, "db", "upgrade"], env=env, check=True, capture_output=True)
            subprocess.run(seed, env=env, check=True, capture_output=True)
        cases = {
            "python -c pass": ([sys.executable, "-c", "pass"], dict(os.environ)),
            "sgam --help": ([sgam, "--help"], dict(os.environ)),
            "sgam get (SQLite)": (get, sqlite),
            "sgam get (PostgreSQL)": (get, postgres),
        }
        results = {name: timed(command, env, args.runs) for name, (command, env) in cases.items()}
    base = statistics.median(results["python -c pass"])
    print(f"({machine_load()} after); {args.runs} runs each")
    print(f"{'command':<24}{'median s':>10}{'fastest s':>11}{'x python':>10}  target")
    for name, samples in results.items():
        median = statistics.median(samples)
        target = TARGETS.get(name)
        verdict = "" if target is None else f"<= {target} {'ok' if median <= target else 'MISSED'}"
        print(f"{name:<24}{median:>10.3f}{min(samples):>11.3f}{median / base:>9.1f}x  {verdict}")


if __name__ == "__main__":
    main()
