"""The model lane at scale: LoCoMo turns as episodes through intake, Celery with one worker of
two processes (`--concurrency 2`), the model extractor against the stub OpenAI-compatible
server (bench/stub_llm.py, its own process, answering a valid empty extraction after a set
latency), the policy stage and PostgreSQL.

    .venv/bin/python bench/llm_lane.py [--episodes 5000] [--latencies 0 0.4 2]
        [--slow 400] [--rpm-episodes 900] [--no-analyze] [--baseline REV]

Per run: episodes/s end to end (first intake to last episode settled), the stub's peak of
requests in flight, the worker's CPU per episode (every process of the worker, from
/proc, between the first intake and the end) and that of the PostgreSQL backends of the run's
database, the stub, the Redis server (shared: everything it served meanwhile) and this
process (the intake, the polling), enqueue→done p50/p99 (`finished_at - received_at`), failed
episodes and 429s. The database is analysed once the first 500 episodes are in, as
autovacuum would within its first minute (`--no-analyze`: not, and the planner guesses: on a
table never analysed it picked indexes that read ~800 entries per update by key). Then a run
with a model answering after 20 s (`--slow` episodes, default settings: nothing may fail), and
one with `SGAM_LLM_RPM=600`
against a stub that refuses past 600 a minute (the rate measured at the stub, and no 429 may
reach an episode). `--baseline REV` measures the same runs for an older commit (a worktree of
it under /tmp, its workers started from it) in the same session, for the figure beside
today's. The database named by --url (must contain "bench") is dropped and recreated for each
run; Redis database 12 is the broker and the budget's store.

The parts: llm_lane_setup.py (the stub, the worker, CPU readings), llm_lane_run.py (one
run), llm_lane_report.py (what is printed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from environment import describe, machine_load, use_support_catalog
from llm_lane_report import Table, against_rules
from llm_lane_run import lane_run
from llm_lane_setup import DEFAULT_BROKER, ROOT, Stub, baseline_checkout
from pipeline_flow import LOCOMO, locomo_lines

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_llm"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("SGAM_BENCH_URL", DEFAULT_URL))
    parser.add_argument("--broker", default=DEFAULT_BROKER, help="Redis db: broker and budget")
    parser.add_argument("--episodes", type=int, default=5000, help="LoCoMo turns per run")
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 0.4, 2.0])
    parser.add_argument("--slow", type=int, default=400, help="episodes of the 20 s run (0: skip)")
    parser.add_argument("--rpm-episodes", type=int, default=900, help="of the RPM run (0: skip)")
    parser.add_argument(
        "--no-analyze",
        action="store_true",
        help="leave the new database unanalysed (the planner then guesses its plans)",
    )
    parser.add_argument("--no-rules", action="store_true", help="skip the rules lane's run")
    parser.add_argument("--baseline", help="a git revision to measure beside this checkout")
    parser.add_argument("--baseline-episodes", type=int, default=200)
    parser.add_argument("--baseline-latencies", type=float, nargs="+", default=[0.0, 0.4])
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose workers run")
    parser.add_argument("--label", default="", help="prefix of each run's name")
    parser.add_argument("--profile", type=Path, help="a folder for py-spy profiles of each run")
    args = parser.parse_args()
    use_support_catalog()
    lines = locomo_lines(args.locomo)
    if len(lines) < args.episodes:
        parser.error(f"--episodes {args.episodes}: {args.locomo} has {len(lines)} turns")
    stamp = f"{datetime.now(UTC):%Y-%m-%d %H:%M}"
    described = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    print(f"SGAM LLM lane benchmark, {stamp} UTC, commit {described}, stub model, 2 processes")
    for line in describe():  # the database is made per run: its settings are not read here
        print(line)
    print(f"({machine_load()} before)")
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)

    def run(name: str, count: int, stub: Stub | None, **options: Any) -> None:
        profile = args.profile / f"{name.replace(' ', '_')}.json" if args.profile else None
        rows.append(
            lane_run(
                f"{args.label}{name}",
                args.url,
                lines[:count],
                stub,
                broker=args.broker,
                code=args.code,
                profile=profile,
                analyze=not args.no_analyze,
                **options,
            )
        )
        print(f"  ({machine_load()})", flush=True)

    stub = Stub()
    rows = Table()
    try:
        if args.baseline:  # measured by that commit's own code: its schema, intake and workers
            checkout = baseline_checkout(args.baseline)
            command = [sys.executable, str(checkout / "bench" / "llm_lane.py")]
            if not (checkout / "bench" / "llm_lane.py").exists():
                command = [sys.executable, __file__]
            command += ["--code", str(checkout), "--label", f"baseline {args.baseline[:8]}, "]
            command += ["--episodes", str(args.baseline_episodes), "--slow", "0"]
            command += ["--rpm-episodes", "0", "--locomo", str(args.locomo), "--url", args.url]
            command += ["--latencies", *map(str, args.baseline_latencies)]
            env = {**os.environ, "PYTHONPATH": str(checkout)}
            subprocess.run(command, env=env, check=False)
        if not args.no_rules:
            run("rules", args.episodes, None)
        for latency in args.latencies:
            run(f"{latency:g} s", args.episodes, stub, latency_s=latency)
        if args.slow:
            run("20 s model", args.slow, stub, latency_s=20.0)
        if args.rpm_episodes:
            run(
                "SGAM_LLM_RPM=600, 0.4 s",
                args.rpm_episodes,
                stub,
                latency_s=0.4,
                stub_rpm=600,
                settings={"SGAM_LLM_RPM": "600"},
            )
    finally:
        stub.stop()
    against_rules(rows)
    print(f"({machine_load()} after)")


if __name__ == "__main__":
    main()
