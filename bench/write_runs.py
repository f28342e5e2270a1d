"""The write benchmarks' engine: a stream of writes (new keys, or supersessions of seeded keys)
through `pipeline.put`, `pipeline.put_many` or the plain-SQL baseline, run by spawned writer
processes in alternating timed phases, and the rates over wall time.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import queue
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Barrier
from typing import Any, Protocol

import psycopg
from figures import rfc3339
from plain_sql import EPISODE, WRITE_ATTRIBUTE, PlainWrite
from scratch_databases import libpq_url

import pipeline
from pipeline import Settings, Store, put, put_many

WRITE_BASE = datetime(2026, 1, 1, tzinfo=UTC)


class Write(Protocol):
    """Writes one fact: `value` for WRITE_ATTRIBUTE of `subject`, from `valid_from`. A batch
    writer only queues it; `flush` writes what is queued in one transaction."""

    def __call__(self, tenant: str, subject: str, value: str, valid_from: datetime) -> None: ...

    def flush(self) -> None: ...


class PutWrite:
    """One fact through the public write path."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, tenant: str, subject: str, value: str, valid_from: datetime) -> None:
        result = put(
            self.store,
            {
                "tenant_id": tenant,
                "subject": subject,
                "attribute": WRITE_ATTRIBUTE,
                "value": value,
                "valid_from": rfc3339(valid_from),
                "source_episode_id": EPISODE,
            },
        )
        if not result.written:
            raise RuntimeError(f"put did not write {tenant}/{subject}")

    def flush(self) -> None:
        """Nothing queued: every put is its own transaction."""


class PutManyWrite:
    """Facts through `pipeline.put_many`, a queue of them per transaction."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.queued: list[dict[str, Any]] = []

    def __call__(self, tenant: str, subject: str, value: str, valid_from: datetime) -> None:
        self.queued.append(
            {
                "tenant_id": tenant,
                "subject": subject,
                "attribute": WRITE_ATTRIBUTE,
                "value": value,
                "valid_from": rfc3339(valid_from),
                "source_episode_id": EPISODE,
            }
        )

    def flush(self) -> None:
        if not self.queued:
            return
        outcomes = put_many(self.store, self.queued, chunk=len(self.queued))
        self.queued = []
        for outcome in outcomes:
            if not isinstance(outcome, pipeline.PutResult) or not outcome.written:
                raise RuntimeError(f"put_many did not write: {outcome!r}")


class Workload:
    """A stream of writes for one tenant: each to a new key, or each superseding the open fact
    of a seeded key (keys taken round-robin, valid_from 30 days later each time)."""

    def __init__(
        self, write: Write, tenant: str, *, supersede: bool, total: int, depth: int
    ) -> None:
        self.write = write
        self.tenant = tenant
        self.supersede = supersede
        self.keys = math.ceil(total / depth) if supersede else 0
        self.done = 0

    def seed(self) -> None:
        """Write the first fact of every key that will be superseded (untimed)."""
        for key in range(self.keys):
            self.write(self.tenant, f"subject-{key}", f"city-{key}-0", WRITE_BASE)
        self.write.flush()

    def step(self) -> None:
        """The next write of the stream."""
        i = self.done
        self.done += 1
        if not self.supersede:
            self.write(self.tenant, f"subject-{i}", f"city-{i}", WRITE_BASE + timedelta(minutes=i))
            return
        key, generation = i % self.keys, i // self.keys + 1
        self.write(
            self.tenant,
            f"subject-{key}",
            f"city-{key}-{generation}",
            WRITE_BASE + timedelta(days=30 * generation),
        )


@dataclass(frozen=True)
class WriteJob:
    """What one writer process does: warm up, seed, then the timed phases in order."""

    url: str
    scenario: str  # "distinct" or "supersede"
    writers: int
    writer: int
    phases: tuple[tuple[str, int], ...]  # (mode "plain" | "put", operations)
    warmup: int
    depth: int
    batch: int  # writes per transaction: 1 (put, plain INSERT) or more (put_many, executemany)


@dataclass(frozen=True)
class PhaseTime:
    mode: str
    operations: int
    start: float
    end: float
    cpu: float  # this process's CPU seconds in the phase


def write_worker(job: WriteJob, barrier: Barrier, results: mp.Queue[Any]) -> None:
    """Entry point of a writer process (spawned): its own Store and its own psycopg connection."""
    try:
        store = Store(Settings(database_url=job.url))
        conn = psycopg.connect(libpq_url(job.url))
        batched = job.batch > 1
        writes: dict[str, Write] = {
            "put": PutManyWrite(store) if batched else PutWrite(store),
            "plain": PlainWrite(conn, store.catalog, batched=batched),
        }
        supersede = job.scenario == "supersede"
        totals = {mode: 0 for mode in writes}
        for mode, operations in job.phases:
            totals[mode] += operations
        prefix = f"bench-{job.scenario}-{job.writers}w{job.writer}-b{job.batch}"
        loads = {
            mode: Workload(
                write, f"{prefix}-{mode}", supersede=supersede, total=totals[mode], depth=job.depth
            )
            for mode, write in writes.items()
        }
        for mode, write in writes.items():
            warm = Workload(
                write, f"{prefix}-warm-{mode}", supersede=supersede, total=job.warmup, depth=2
            )
            warm.seed()
            for done in range(1, job.warmup + 1):
                warm.step()
                if done % job.batch == 0:
                    write.flush()
            write.flush()
            loads[mode].seed()
        timings = []
        for mode, operations in job.phases:
            barrier.wait(timeout=600)
            start, start_cpu = time.perf_counter(), time.process_time()
            for done in range(1, operations + 1):
                loads[mode].step()
                if done % job.batch == 0:
                    writes[mode].flush()
            writes[mode].flush()
            end, cpu = time.perf_counter(), time.process_time() - start_cpu
            timings.append(PhaseTime(mode, operations, start, end, cpu))
        conn.close()
        store.dispose()
        results.put(("ok", timings))
    except BaseException:
        barrier.abort()
        results.put(("error", traceback.format_exc()))


@dataclass(frozen=True)
class WriteResult:
    scenario: str
    writers: int
    rates: dict[str, float]  # facts per second by mode
    cpu_ms: dict[str, float]  # client CPU milliseconds per write by mode


def run_writes(
    url: str, scenario: str, writers: int, args: argparse.Namespace, batch: int = 1
) -> WriteResult:
    """Run one scenario with `writers` spawned processes, `batch` writes per transaction; rates
    are totals over wall time."""
    total = args.batch_puts if batch > 1 else args.puts
    per_phase = max(1, total // writers // args.rounds)
    phases: list[tuple[str, int]] = []
    for round_ in range(args.rounds):  # ABBA order cancels slow drift between the two modes
        order = ("plain", "put") if round_ % 2 == 0 else ("put", "plain")
        phases += [(mode, per_phase) for mode in order]
    context = mp.get_context("spawn")
    barrier = context.Barrier(writers)
    results: mp.Queue[Any] = context.Queue()
    processes = [
        context.Process(
            target=write_worker,
            args=(
                WriteJob(
                    url,
                    scenario,
                    writers,
                    writer,
                    tuple(phases),
                    max(args.warmup, batch),
                    args.depth,
                    batch,
                ),
                barrier,
                results,
            ),
        )
        for writer in range(writers)
    ]
    for process in processes:
        process.start()
    outcomes = []
    for _ in processes:
        try:
            outcomes.append(results.get(timeout=3600))
        except queue.Empty:
            sys.exit("a writer process did not report within an hour")
    for process in processes:
        process.join()
    errors = [detail for status, detail in outcomes if status == "error"]
    if errors:
        sys.exit(f"writer failed:\n{errors[0]}")
    per_writer: list[list[PhaseTime]] = [detail for _, detail in outcomes]
    elapsed = {"plain": 0.0, "put": 0.0}
    cpu = {"plain": 0.0, "put": 0.0}
    operations = {"plain": 0, "put": 0}
    for index, (mode, _) in enumerate(phases):
        runs = [timings[index] for timings in per_writer]
        elapsed[mode] += max(run.end for run in runs) - min(run.start for run in runs)
        cpu[mode] += sum(run.cpu for run in runs)
        operations[mode] += sum(run.operations for run in runs)
    rates = {mode: operations[mode] / elapsed[mode] for mode in elapsed}
    cpu_ms = {mode: 1000 * cpu[mode] / operations[mode] for mode in cpu}
    return WriteResult(scenario, writers, rates, cpu_ms)
