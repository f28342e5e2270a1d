"""The pipeline on real chat traffic: every LoCoMo turn (5,882, read where the data lies) as an
episode through intake, Celery workers with the rules extractor, the policy stage and the
ledger, on PostgreSQL and the local Redis; then the same in inline mode; then the hot path.

    .venv/bin/python bench/pipeline_flow.py [--workers 1 2] [--remember 500] [--url URL]

Reports, per run: episodes/s end to end (first intake to last episode done), enqueue→done
latency p50/p99 (an episode's `finished_at - received_at`, both stamped by this host's clock),
and the wall time per episode. The hot path: `pipeline.remember` p50/p99 for explicit
statements. Targets on a 2-core machine shared by everything: >= 300 episodes/s, p50 <= 50 ms,
remember p50 <= 10 ms and p99 <= 30 ms. The database named by --url (must contain "bench")
is dropped and recreated for each run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis
from environment import describe, machine_load, use_support_catalog
from figures import percentile
from scratch_databases import recreate
from sqlalchemy import create_engine, func, select

import pipeline
from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store, open_store
from pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_pipeline"
BROKER = "redis://127.0.0.1:6379/9"


def locomo_lines(path: Path) -> list[dict[str, Any]]:
    """Every turn as an intake line: tenant per conversation, subject per speaker, session
    per LoCoMo session, occurred_at the session's time plus one second per turn."""
    lines = []
    for conversation in json.loads(path.read_text(encoding="utf-8")):
        turns = conversation["conversation"]
        sample = conversation["sample_id"]
        for key, session in turns.items():
            if not (key.startswith("session_") and isinstance(session, list)):
                continue
            started = datetime.strptime(turns[f"{key}_date_time"], "%I:%M %p on %d %B, %Y")
            for index, turn in enumerate(session):
                lines.append(
                    {
                        "tenant_id": f"locomo-{sample}",
                        "subject": turn["speaker"].casefold(),
                        "subject_names": [turn["speaker"]],
                        "session_id": f"{sample}:{key}",
                        "occurred_at": (
                            started.replace(tzinfo=UTC) + timedelta(seconds=index)
                        ).isoformat(),
                        "text": turn["text"] or "(no text)",
                        "episode_id": f"{sample}:{turn['dia_id']}",
                    }
                )
    return lines


def fresh_database(url: str) -> None:
    recreate(url)
    store = open_store_migrated(url)
    store.dispose()


def open_store_migrated(url: str, **settings: Any) -> Store:
    store = Store(Settings(database_url=url, **settings))
    store.upgrade()
    return store


def latencies_ms(url: str) -> list[float]:
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(select(EpisodeRow.received_at, EpisodeRow.finished_at)).all()
    engine.dispose()
    return [(done - received).total_seconds() * 1000 for received, done in rows if done]


def done_count(url: str) -> tuple[int, int]:
    engine = create_engine(url)
    with engine.connect() as connection:
        done = connection.execute(
            select(func.count()).where(EpisodeRow.status == "done")
        ).scalar_one()
        total = connection.execute(select(func.count()).select_from(EpisodeRow)).scalar_one()
    engine.dispose()
    return int(done), int(total)


def start_worker(url: str, workers: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SGAM_DATABASE_URL": url, "SGAM_BROKER_URL": BROKER}
    command = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "--queues"]
    command += ["extract", "--concurrency", str(workers), "--loglevel", "warning"]
    command += ["--without-mingle", "--without-gossip"]
    worker = subprocess.Popen(command, env=env, cwd=ROOT, start_new_session=True)
    time.sleep(4)  # the worker's start-up is not part of the pipeline's figures
    return worker


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    os.killpg(worker.pid, signal.SIGTERM)
    worker.wait(timeout=60)


def celery_run(
    url: str, lines: list[dict[str, Any]], workers: int, rate: int | None
) -> dict[str, Any]:
    """All episodes at once (`rate` None: the pipeline's throughput), or offered at a steady
    `rate` per second in batches every 100 ms (a chat backend's traffic: the latency)."""
    fresh_database(url)
    redis.Redis.from_url(BROKER).flushdb()
    worker = start_worker(url, workers)
    store = open_store(Settings(database_url=url, broker_url=BROKER))
    per_tick = len(lines) if rate is None else max(1, rate // 10)
    try:
        started = time.perf_counter()
        for tick, first in enumerate(range(0, len(lines), per_tick)):
            pause = started + tick * 0.1 - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            receipts = pipeline.ingest(store, lines[first : first + per_tick]).receipts
            assert {r.status for r in receipts} == {"queued"}
        intake = time.perf_counter() - started
        while done_count(url)[0] < len(lines):
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
    finally:
        store.dispose()
        stop_worker(worker)
    offered = "all at once" if rate is None else f"{rate}/s offered"
    return summary(f"celery, {workers} w, {offered}", url, len(lines), elapsed, intake)


def inline_run(url: str, lines: list[dict[str, Any]]) -> dict[str, Any]:
    fresh_database(url)
    store = open_store(Settings(database_url=url))
    try:
        started = time.perf_counter()
        report = pipeline.ingest(store, lines)
        elapsed = time.perf_counter() - started
    finally:
        store.dispose()
    assert {r.status for r in report.receipts} == {"done"}
    return summary("inline (no broker)", url, len(lines), elapsed, elapsed)


def summary(name: str, url: str, total: int, elapsed: float, intake: float) -> dict[str, Any]:
    latency = latencies_ms(url)
    return {
        "run": name,
        "episodes": total,
        "seconds": elapsed,
        "episodes/s": total / elapsed,
        "intake s": intake,
        "p50 ms": percentile(latency, 0.5),
        "p99 ms": percentile(latency, 0.99),
        "ms/episode": elapsed * 1000 / total,
    }


def remember_run(url: str, count: int) -> dict[str, Any]:
    fresh_database(url)
    store = open_store(Settings(database_url=url))
    cities = ["Lisbon", "Porto", "Oslo", "Rome", "Lima", "Quito", "Hanoi", "Perth"]
    samples = []
    try:
        for n in range(count + 50):
            request = {
                "tenant_id": "bench",
                "subject": f"user-{n}",
                "text": f"Remember that my home city is {cities[n % len(cities)]}.",
                "at": (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=n)).isoformat(),
            }
            started = time.perf_counter()
            said = pipeline.remember(store, request)
            if n >= 50:  # warm-up: connections, prepared statements, caches
                samples.append((time.perf_counter() - started) * 1000)
            assert said.facts, said
    finally:
        store.dispose()
    return {
        "remember": count,
        "p50 ms": percentile(samples, 0.5),
        "p99 ms": percentile(samples, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("SGAM_BENCH_URL", DEFAULT_URL))
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--remember", type=int, default=500)
    parser.add_argument("--rate", type=int, default=300, help="offered episodes/s (steady runs)")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    args = parser.parse_args()
    use_support_catalog()
    lines = locomo_lines(args.locomo)
    stamp = f"{datetime.now(UTC):%Y-%m-%d %H:%M}"
    print(f"SGAM pipeline benchmark, {stamp} UTC, {len(lines)} LoCoMo turns")
    print("(the cores are shared by PostgreSQL, Redis, the producer and the workers)")
    for line in describe(args.url):
        print(line)
    print(f"({machine_load()} before)")
    rows = [celery_run(args.url, lines, workers, None) for workers in args.workers]
    rows += [celery_run(args.url, lines, workers, args.rate) for workers in args.workers]
    rows.append(inline_run(args.url, lines))
    header = ["run", "episodes/s", "p50 ms", "p99 ms", "ms/episode", "intake s", "seconds"]
    print(f"{header[0]:<28}" + "".join(f"{h:>12}" for h in header[1:]))
    for row in rows:
        print(f"{row['run']:<28}" + "".join(f"{row[h]:>12.1f}" for h in header[1:]))
    hot = remember_run(args.url, args.remember)
    figures = f"p50 {hot['p50 ms']:.2f} ms, p99 {hot['p99 ms']:.2f} ms"
    print(f"hot path: {hot['remember']} remember calls on PostgreSQL, {figures}")
    print(f"({machine_load()} after)")


if __name__ == "__main__":
    main()
