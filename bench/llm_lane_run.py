"""One run of the llm_lane benchmark: a fresh database, a worker, the episodes ingested, the
wait until every one has settled, and the run's figures as one row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis
from figures import percentile
from llm_lane_setup import (
    ROOT,
    Stub,
    backend_cpu_s,
    group_cpu_s,
    named_pids,
    process_cpu_s,
    start_worker,
)
from pipeline_flow import latencies_ms, open_store_migrated
from scratch_databases import recreate
from sqlalchemy import Engine, create_engine, func, select, text

import pipeline
from pipeline.db.models import EpisodeRow
from pipeline.db.store import open_store
from pipeline.settings import Settings

FIRST_CHUNK = 500  # episodes ingested before the database is analysed
_GRACE = timedelta(seconds=120)  # past SGAM_SWEEP_GRACE_S and any lease of a stalled claim


def settled_counts(engine: Engine) -> tuple[int, int]:
    """(done, failed) episodes, in one query over the poller's one connection."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(EpisodeRow.status, func.count())
            .where(EpisodeRow.status.in_(["done", "failed"]))
            .group_by(EpisodeRow.status)
        ).all()
    counts = {str(status): int(count) for status, count in rows}
    return counts.get("done", 0), counts.get("failed", 0)


def lane_run(
    name: str,
    url: str,
    lines: list[dict[str, Any]],
    stub: Stub | None,
    *,
    broker: str,
    latency_s: float = 0.0,
    code: Path = ROOT,
    stub_rpm: float | None = None,
    settings: dict[str, str] | None = None,
    timeout_s: float = 1800,
    profile: Path | None = None,
    analyze: bool = True,
) -> dict[str, Any]:
    """One run; `stub` None: the rules lane, the baseline the model lane's figures are read
    against. `profile`: py-spy samples the worker's processes into that file (speedscope)."""
    recreate(url)
    open_store_migrated(url).dispose()
    redis.Redis.from_url(broker).flushdb()
    if stub is not None:
        stub.configure(latency_s, stub_rpm)
    worker = start_worker(url, broker, stub, code, settings or {})
    store = open_store(Settings(database_url=url, broker_url=broker))
    poller = create_engine(url, pool_size=1)
    spy = None
    if profile is not None:
        spy = subprocess.Popen(
            [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(worker.pid)]
            + ["--subprocesses", "--gil", "--rate", "200", "--format", "speedscope"]
            + ["-o", str(profile)],
            stdout=subprocess.DEVNULL,
        )
    redis_pids = named_pids("redis-server")
    try:
        cpu_before = group_cpu_s(worker.pid)
        others_before = (
            process_cpu_s(stub.process.pid) if stub is not None else 0.0,
            sum(process_cpu_s(pid) for pid in redis_pids),
            time.process_time(),
        )
        started = time.perf_counter()
        receipts = pipeline.ingest(store, lines[:FIRST_CHUNK]).receipts
        if analyze:  # what autovacuum does within its first minute of a new table
            with poller.connect() as connection:
                connection.execute(text("ANALYZE"))
                connection.commit()
        receipts += pipeline.ingest(store, lines[FIRST_CHUNK:]).receipts
        assert {r.status for r in receipts} == {"queued"}
        swept, progress = 0, (0, time.perf_counter())
        while True:
            done, failed = settled_counts(poller)
            if done + failed >= len(lines) or time.perf_counter() - started > timeout_s:
                break
            if done + failed > progress[0]:
                progress = (done + failed, time.perf_counter())
            elif time.perf_counter() - progress[1] > 30:
                # Nothing settled for 30 s: wake-ups were lost (another test on this machine
                # may flush every Redis database). The sweeper's own path re-queues them.
                pending, stuck, _ = pipeline.sweep(store, now=datetime.now(UTC) + _GRACE)
                swept += pending + stuck
                progress = (done + failed, time.perf_counter())
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
        cpu = group_cpu_s(worker.pid) - cpu_before
        others = (
            (process_cpu_s(stub.process.pid) if stub is not None else 0.0) - others_before[0],
            sum(process_cpu_s(pid) for pid in redis_pids) - others_before[1],
            time.process_time() - others_before[2],
            backend_cpu_s(poller),
        )
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=120)
        poller.dispose()
        store.dispose()
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    latency = latencies_ms(url)
    row = {
        "run": name,
        "episodes": len(lines),
        "done": done,
        "failed": failed,
        "episodes/s": done / elapsed,
        "peak in flight": 0,
        "cpu ms/ep": cpu * 1000 / max(1, done),
        "pg ms/ep": others[3] * 1000 / max(1, done),
        "stub ms/ep": others[0] * 1000 / max(1, done),
        "redis ms/ep": others[1] * 1000 / max(1, done),
        "bench ms/ep": others[2] * 1000 / max(1, done),
        "p50 s": percentile(latency, 0.5) / 1000 if latency else 0.0,
        "p99 s": percentile(latency, 0.99) / 1000 if latency else 0.0,
        "429s": 0,
        "stub req/s": 0.0,
        "re-queued": swept,
    }
    if stub is not None:
        stats = stub.stats()
        first, last = stats["first_answer_at"], stats["last_answer_at"]
        span = last - first if first and last else 0
        row["peak in flight"] = stats["peak_in_flight"]
        row["429s"] = stats["rejected"]
        row["stub req/s"] = (stats["answered"] - 1) / span if span > 0 else 0.0
    return row
