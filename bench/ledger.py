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
See bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import math
import multiprocessing as mp
import os
import platform
import queue
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any, Protocol

import psycopg
import sqlalchemy
from figures import percentile
from psycopg import pq
from psycopg.types.json import Jsonb
from scratch_databases import drop, libpq_url, recreate
from sqlalchemy import event, make_url

import pipeline
import schemas
from pipeline import Settings, Store, get, put, put_many
from pipeline.db.models import FACT_COLUMNS, ClaimRow
from pipeline.ledger.versions import new_version
from pipeline.ledger.write import claim_columns
from schemas.catalog import Catalog
from schemas.facts import ClaimRecord, FactStatus, Trust
from schemas.fields import canonical_json

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench"
WRITE_ATTRIBUTE = "home_city"  # a single-valued string attribute of the default catalogue
EPISODE = "bench-episode"
WRITE_BASE = datetime(2026, 1, 1, tzinfo=UTC)
PUT_TARGET = 0.5  # put must reach at least half the plain INSERT rate
BATCH_RATE_TARGET = 5000  # put_many facts/s with one writer
GET_P99_TARGET_MS = 2.0

COLUMN_LIST = ", ".join(FACT_COLUMNS)
COPY_COLUMNS = {"facts": list(FACT_COLUMNS), "claims": [c.name for c in ClaimRow.__table__.columns]}
INSERT_ONE = (
    f"INSERT INTO facts ({COLUMN_LIST}) VALUES ({', '.join(f'%({c})s' for c in FACT_COLUMNS)})"
)
CLOSE_VERSION = "UPDATE facts SET superseded_at = %s WHERE fact_id = %s AND superseded_at IS NULL"

# The same predicates as pipeline.read.get, written by hand (status 'active' only).
_RAW_VISIBLE = (
    f"SELECT {COLUMN_LIST} FROM facts "
    "WHERE tenant_id = %(tenant)s AND agent_id = 'default' AND purpose = 'default' "
    "AND subject = %(subject)s AND forgotten_at IS NULL AND attribute = %(attribute)s "
    "AND status = 'active' AND (expires_at IS NULL OR expires_at > %(now)s) "
    "AND valid_from <= %(at)s AND (valid_to IS NULL OR valid_to > %(at)s) "
)
RAW_CURRENT = _RAW_VISIBLE + "AND superseded_at IS NULL ORDER BY attribute, valid_from"
RAW_KNOWN = (
    _RAW_VISIBLE + "AND recorded_at <= %(known)s "
    "AND (superseded_at IS NULL OR superseded_at > %(known)s) ORDER BY attribute, valid_from"
)

# Bulk-load shape: attributes a subject may have, and how many intervals a key gets.
LOAD_ATTRIBUTES = (
    "home_city",
    "employer",
    "passport_deadline",
    "birthday",
    "account_plan",
    "contact_channel",
    "monthly_budget",
    "newsletter_opt_in",
    "languages",
)
INTERVAL_WEIGHTS = {1: 55, 2: 25, 3: 12, 4: 8}  # about 2.5 row versions per key
CITIES = ["Lisbon", "Berlin", "Osaka", "Lagos", "Quito", "Hanoi", "Oslo", "Perth", "Tunis", "Lima"]
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne"]
LANGUAGES = ["en", "fr", "de", "es", "pt", "ja", "sw", "vi"]


# -- shared helpers -------------------------------------------------------------------------


def rfc3339(moment: datetime) -> str:
    """`moment` as an RFC 3339 UTC string with a Z, as a caller would send it."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print rows under headers, the first column left-aligned and the rest right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    line = "  ".join(
        f"{{:<{width}}}" if i == 0 else f"{{:>{width}}}" for i, width in enumerate(widths)
    )
    print(line.format(*headers))
    print("  ".join("-" * width for width in widths))
    for row in rows:
        print(line.format(*row))


class FactRows:
    """Builds `facts` and `claims` rows with the ledger's own functions (`new_version`,
    `claim_columns`), as a verified put of each value would store them."""

    def __init__(self, catalog: Catalog, rng: random.Random | None = None) -> None:
        self.catalog = catalog
        self.rng = rng

    def new_id(self) -> str:
        if self.rng is None:
            return str(uuid.uuid4())
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def claim(
        self,
        *,
        tenant: str,
        subject: str,
        attribute: str,
        value: Any,
        valid_from: datetime,
        recorded_at: datetime,
        valid_to: datetime | None = None,
    ) -> ClaimRecord:
        spec = self.catalog.attributes[attribute]
        return ClaimRecord(
            claim_id=self.new_id(),
            tenant_id=tenant,
            agent_id="default",
            purpose="default",
            subject=subject,
            attribute=attribute,
            cardinality=spec.cardinality,
            value=value,
            value_hash=hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest(),
            kind=spec.kind,
            schema_version=self.catalog.version,
            valid_from=valid_from,
            valid_to=valid_to,
            source_episode_id=EPISODE,
            evidence=None,
            confidence=1.0,
            trust=Trust.VERIFIED,
            recorded_at=recorded_at,
            expires_at=recorded_at + self.catalog.retention(attribute),
        )

    def row(
        self, *, supersedes: str | None = None, claim: ClaimRecord | None = None, **fields: Any
    ) -> dict[str, Any]:
        """The first version of the fact of `claim` (or of a claim made from `fields`)."""
        claim = claim or self.claim(**fields)
        return new_version(
            claim,
            version=1,
            status=FactStatus.ACTIVE,
            valid_to=claim.valid_to,
            supersedes=supersedes,
            now=claim.recorded_at,
        )


def sql_params(row: dict[str, Any]) -> dict[str, Any]:
    """A facts row as psycopg parameters: the value goes to the JSONB column as JSON."""
    return row | {"value": Jsonb(row["value"])}


class RoundTrips:
    """Counts client requests (simple Query and extended-protocol Sync messages) with PQtrace."""

    _REQUEST = re.compile(r"^F\t\d+\t(Query|Sync)\b", re.MULTILINE)

    def __init__(self) -> None:
        self.file = tempfile.NamedTemporaryFile("w+", suffix=".pqtrace")  # noqa: SIM115

    def attach(self, pgconn: pq.abc.PGconn) -> None:
        pgconn.trace(self.file.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

    def attach_store(self, store: Store) -> None:
        event.listen(store.engine, "connect", lambda dbapi, _record: self.attach(dbapi.pgconn))

    def count(self) -> int:
        """Requests traced so far."""
        self.file.flush()
        return len(self._REQUEST.findall(Path(self.file.name).read_text(errors="replace")))

    def per_call(self, call: Callable[[int], object], times: int = 20) -> float:
        """Mean requests per call of `call`, after as many untimed calls to warm up."""
        for i in range(times):  # warm: connect, prepare statements
            call(i)
        before = self.count()
        for i in range(times, 2 * times):
            call(i)
        return (self.count() - before) / times


# -- database setup -------------------------------------------------------------------------


def recreate_database(url: str) -> None:
    """Drop and create the benchmark database, then migrate it the way operators do."""
    recreate(url)
    store = Store(Settings(database_url=url))
    store.upgrade()
    store.dispose()


def code_identity() -> str:
    """Where `pipeline` was imported from, a digest of its and the schemas' source, and the
    git state of that tree (the ledger code may be edited between runs)."""
    digest = hashlib.sha256()
    roots = [Path(pipeline.__file__).parent, Path(schemas.__file__).parent]
    for root in roots:
        for source in sorted(root.rglob("*")):
            if source.suffix in {".py", ".yaml"}:
                digest.update(source.read_bytes())
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
            cwd=roots[0],
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        described = "not a git checkout"
    return f"{roots[0]} (git {described}, source sha256 {digest.hexdigest()[:12]})"


# Every server setting the figures depend on: durability, memory, planning, statistics.
SERVER_SETTINGS = (
    "server_version",
    "shared_buffers",
    "work_mem",
    "synchronous_commit",
    "fsync",
    "wal_level",
    "autovacuum",
    "plan_cache_mode",
    "jit",
    "random_page_cost",
    "effective_cache_size",
    "max_locks_per_transaction",
    "max_connections",
)


def describe_environment(url: str) -> list[str]:
    """Lines naming the machine, the server settings that matter here, and the code measured."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in SERVER_SETTINGS
        }
    version = settings.pop("server_version").split()[0]
    return [
        f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
        f", SQLAlchemy {sqlalchemy.__version__}, psycopg {psycopg.__version__} "
        f"({psycopg.pq.__impl__})",
        f"postgres {version}: " + ", ".join(f"{name} {value}" for name, value in settings.items()),
        f"code: {code_identity()}",
    ]


def machine_load() -> str:
    """How busy the CPUs are with other work right now: the mean number of runnable tasks over
    one second besides this sampler (from /proc/loadavg), and the 1-minute load average."""
    try:
        samples = []
        for _ in range(20):
            running = Path("/proc/loadavg").read_text().split()[3].split("/")[0]
            samples.append(int(running) - 1)
            time.sleep(0.05)
    except OSError:
        return f"load average {os.getloadavg()[0]:.2f}"
    busy = sum(samples) / len(samples)
    note = "  <- other work is competing for the CPUs" if busy >= 0.5 else ""
    return f"other runnable tasks {busy:.1f}, load average {os.getloadavg()[0]:.2f}{note}"


# -- writes ---------------------------------------------------------------------------------


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


class PlainWrite:
    """The same `facts` rows as put writes, by plain SQL, one transaction per fact, or with
    `batched` one transaction per flush (the closes by executemany, then the rows by one
    executemany, which psycopg sends as a pipeline).

    A new key is one INSERT. Superseding an open fact is what put does to the facts table:
    close the open version, insert its closed-interval version and the new fact.
    """

    def __init__(self, conn: psycopg.Connection[Any], catalog: Catalog, *, batched: bool) -> None:
        self.conn = conn
        self.template = FactRows(catalog).row(
            tenant="template",
            subject="template",
            attribute=WRITE_ATTRIBUTE,
            value="template",
            valid_from=WRITE_BASE,
            recorded_at=WRITE_BASE,
        )
        self.retention = catalog.retention(WRITE_ATTRIBUTE)
        self.open: dict[tuple[str, str], dict[str, Any]] = {}
        self.batched = batched
        self.closes: list[tuple[datetime, str]] = []
        self.inserts: list[dict[str, Any]] = []
        self.queued: dict[str, dict[str, Any]] = {}  # open rows in `inserts`, by fact_id

    def __call__(self, tenant: str, subject: str, value: str, valid_from: datetime) -> None:
        now = datetime.now(UTC)
        previous = self.open.get((tenant, subject))
        # The template's shape comes from the ledger's `new_version`; only what differs per
        # write is computed here, as cheaply as a hand-written INSERT would.
        row = self.template | {
            "fact_id": str(uuid.uuid4()),
            "tenant_id": tenant,
            "subject": subject,
            "value": value,
            "value_hash": hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest(),
            "valid_from": valid_from,
            "recorded_at": now,
            "expires_at": now + self.retention,
            "supersedes_fact_id": previous["fact_id"] if previous else None,
        }
        self.open[(tenant, subject)] = row
        if self.batched:
            if previous is not None:
                queued = self.queued.get(previous["fact_id"])
                if queued is not None:  # inserted by this flush: it goes in closed
                    queued["superseded_at"] = now
                else:
                    self.closes.append((now, previous["fact_id"]))
                self.inserts.append(self._closed(previous, valid_from, now))
            self.queued[row["fact_id"]] = sql_params(row)
            self.inserts.append(self.queued[row["fact_id"]])
            return
        with self.conn.transaction(), self.conn.cursor() as cursor:
            if previous is None:
                cursor.execute(INSERT_ONE, sql_params(row))
            else:
                cursor.execute(CLOSE_VERSION, (now, previous["fact_id"]))
                self._insert_two(cursor, self._closed(previous, valid_from, now), row)

    def flush(self) -> None:
        if not self.inserts:
            return
        with self.conn.transaction(), self.conn.cursor() as cursor:
            if self.closes:
                cursor.executemany(CLOSE_VERSION, self.closes)
            cursor.executemany(INSERT_ONE, self.inserts)
        self.closes, self.inserts, self.queued = [], [], {}

    @staticmethod
    def _closed(previous: dict[str, Any], valid_to: datetime, now: datetime) -> dict[str, Any]:
        closed = {"version": previous["version"] + 1, "valid_to": valid_to, "recorded_at": now}
        return sql_params(previous | closed)

    @staticmethod
    def _insert_two(
        cursor: psycopg.Cursor[Any], first: dict[str, Any], second: dict[str, Any]
    ) -> None:
        slots = ", ".join(["%s"] * len(FACT_COLUMNS))
        values = [first[c] for c in FACT_COLUMNS]
        values += [sql_params(second)[c] for c in FACT_COLUMNS]
        cursor.execute(f"INSERT INTO facts ({COLUMN_LIST}) VALUES ({slots}), ({slots})", values)


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


# -- bulk load and reads --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadedKey:
    tenant: str
    subject: str
    attribute: str
    first_valid_from: datetime
    first_recorded_at: datetime


def _value(attribute: str, rng: random.Random) -> Any:
    """A plausible value of `attribute` for the bulk load."""
    match attribute:
        case "home_city":
            return f"{rng.choice(CITIES)} {rng.randrange(100)}"
        case "employer":
            return f"{rng.choice(COMPANIES)} {rng.randrange(1000)}"
        case "passport_deadline" | "birthday":
            return (datetime(1960, 1, 1) + timedelta(days=rng.randrange(25_000))).date().isoformat()
        case "account_plan":
            return rng.choice(["free", "pro", "enterprise"])
        case "contact_channel":
            return rng.choice(["email", "phone", "chat"])
        case "monthly_budget":
            return rng.randrange(50, 5000)
        case "newsletter_opt_in":
            return rng.random() < 0.5
        case _:
            raise ValueError(attribute)


def key_rows(
    rows: FactRows, rng: random.Random, now: datetime, tenant: str, subject: str, attribute: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The claims and fact row versions the ledger holds for one key after a few sequential
    supersessions, each with its table."""
    intervals = rng.choices(list(INTERVAL_WEIGHTS), weights=list(INTERVAL_WEIGHTS.values()))[0]
    valid = [now - timedelta(days=rng.uniform(1500, 3000))]
    recorded = [now - timedelta(days=rng.uniform(300, 360))]
    for _ in range(intervals - 1):
        valid.append(valid[-1] + timedelta(days=rng.uniform(30, 360)))
        recorded.append(recorded[-1] + timedelta(days=rng.uniform(1, 60)))
    previous: str | None = None
    for i in range(intervals):
        last = i == intervals - 1
        # A few last intervals were written with their own end (some in the past).
        end = now + timedelta(days=rng.uniform(-200, 400)) if last and rng.random() < 0.05 else None
        if end is not None and end <= valid[i]:
            end = None
        claim = rows.claim(
            tenant=tenant,
            subject=subject,
            attribute=attribute,
            value=_value(attribute, rng),
            valid_from=valid[i],
            recorded_at=recorded[i],
            valid_to=end,
        )
        yield "claims", claim_columns(claim)
        row = rows.row(claim=claim, supersedes=previous)
        if last:
            yield "facts", row
        else:
            # The open version was closed when the next fact arrived; its successor holds
            # the closed interval.
            yield "facts", row | {"superseded_at": recorded[i + 1]}
            closed = {"version": 2, "valid_to": valid[i + 1], "recorded_at": recorded[i + 1]}
            yield "facts", row | closed
        previous = row["fact_id"]


def language_rows(
    rows: FactRows, rng: random.Random, now: datetime, tenant: str, subject: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A multi-valued attribute: one claim and one open fact per value, each in its own slot."""
    for language in rng.sample(LANGUAGES, rng.randint(1, 3)):
        claim = rows.claim(
            tenant=tenant,
            subject=subject,
            attribute="languages",
            value=language,
            valid_from=now - timedelta(days=rng.uniform(100, 3000)),
            recorded_at=now - timedelta(days=rng.uniform(1, 300)),
        )
        yield "claims", claim_columns(claim)
        yield "facts", rows.row(claim=claim)


def generate(
    catalog: Catalog, target: int, seed: int, now: datetime, keys: list[LoadedKey]
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """About `target` fact rows (and their claims) over many tenants and subjects, each with
    its table; appends every key to `keys`."""
    rng = random.Random(seed)
    rows = FactRows(catalog, rng)
    tenants = max(1, target // 2000)
    produced = 0
    number = 0
    while produced < target:
        number += 1
        tenant, subject = f"tenant-{rng.randrange(tenants):05d}", f"user-{number:08d}"
        for attribute in rng.sample(LOAD_ATTRIBUTES, rng.randint(3, len(LOAD_ATTRIBUTES))):
            if attribute == "languages":
                batch = list(language_rows(rows, rng, now, tenant, subject))
            else:
                batch = list(key_rows(rows, rng, now, tenant, subject, attribute))
            facts = [row for table, row in batch if table == "facts"]
            first = min(facts, key=lambda row: row["valid_from"])
            keys.append(
                LoadedKey(tenant, subject, attribute, first["valid_from"], first["recorded_at"])
            )
            for table, row in batch:
                columns = COPY_COLUMNS[table]
                yield (
                    table,
                    tuple(canonical_json(row[c]) if c == "value" else row.get(c) for c in columns),
                )
            produced += len(facts)


def load_facts(url: str, catalog: Catalog, target: int, seed: int) -> tuple[list[LoadedKey], int]:
    """COPY about `target` rows into facts and their claims into claims (with all their
    indexes and constraints), then VACUUM ANALYZE and CHECKPOINT so that later timings see
    settled tables. Returns the keys and the number of fact rows."""
    keys: list[LoadedKey] = []
    now = datetime.now(UTC)
    count = 0
    claim_list = ", ".join(COPY_COLUMNS["claims"])
    # One COPY per connection at a time: the claims go over a second connection alongside.
    with (
        psycopg.connect(libpq_url(url), autocommit=True) as conn,
        psycopg.connect(libpq_url(url), autocommit=True) as claims_conn,
    ):
        with (
            conn.cursor() as cursor,
            cursor.copy(f"COPY facts ({COLUMN_LIST}) FROM STDIN") as facts_copy,
            claims_conn.cursor() as claims_cursor,
            claims_cursor.copy(f"COPY claims ({claim_list}) FROM STDIN") as claims_copy,
        ):
            for table, record in generate(catalog, target, seed, now, keys):
                if table == "facts":
                    facts_copy.write_row(record)
                    count += 1
                else:
                    claims_copy.write_row(record)
        conn.execute("VACUUM ANALYZE facts, claims")
        conn.execute("CHECKPOINT")
    return keys, count


@dataclass(frozen=True)
class Lookup:
    kind: str  # "current", "at" or "known_at"
    query: dict[str, Any]  # for pipeline.get
    sql: str
    params: dict[str, Any]  # for the raw SELECT, except "now"


def make_lookups(keys: Sequence[LoadedKey], count: int, seed: int) -> list[Lookup]:
    """`count` random lookups of each kind, interleaved."""
    rng = random.Random(seed + 1)
    now = datetime.now(UTC)
    lookups = []
    for key in rng.sample(list(keys), min(count, len(keys))):
        base = {"tenant_id": key.tenant, "subject": key.subject, "attribute": key.attribute}
        params = {"tenant": key.tenant, "subject": key.subject, "attribute": key.attribute}
        at = key.first_valid_from + (now - key.first_valid_from) * rng.random()
        known = key.first_recorded_at + (now - key.first_recorded_at) * rng.random()
        lookups += [
            Lookup("current", base, RAW_CURRENT, params | {"at": None}),
            Lookup("at", base | {"at": rfc3339(at)}, RAW_CURRENT, params | {"at": at}),
            Lookup(
                "known_at",
                base | {"known_at": rfc3339(known)},
                RAW_KNOWN,
                params | {"at": None, "known": known},
            ),
        ]
    return lookups


def raw_select(conn: psycopg.Connection[Any], lookup: Lookup) -> list[tuple[Any, ...]]:
    """The lookup as one hand-written, auto-prepared SELECT in autocommit mode."""
    now = datetime.now(UTC)
    params = lookup.params | {"now": now}
    if params["at"] is None:
        params["at"] = now
    return conn.execute(lookup.sql, params).fetchall()  # type: ignore[arg-type]


@dataclass
class ReadResult:
    get_ms: dict[str, list[float]]
    raw_ms: dict[str, list[float]]
    found: dict[str, int]
    mismatches: int
    cpu_ms: dict[str, float]  # client CPU time per call, "get" and "raw", over every lookup


def run_reads(url: str, warm: Sequence[Lookup], timed: Sequence[Lookup]) -> ReadResult:
    """Time get() and the raw SELECT on the same lookups, alternating which goes first."""
    store = Store(Settings(database_url=url))
    conn = psycopg.connect(libpq_url(url), autocommit=True)
    kinds = ("current", "at", "known_at")
    result = ReadResult(
        {k: [] for k in kinds}, {k: [] for k in kinds}, dict.fromkeys(kinds, 0), 0, {}
    )
    cpu = {"get": 0.0, "raw": 0.0}

    for lookup in warm:
        get(store, lookup.query)
        raw_select(conn, lookup)
    for index, lookup in enumerate(timed):
        order = ("get", "raw") if index % 2 == 0 else ("raw", "get")
        counts = {}
        for which in order:
            start, start_cpu = time.perf_counter(), time.process_time()
            counts[which] = len(
                get(store, lookup.query) if which == "get" else raw_select(conn, lookup)
            )
            elapsed = (time.perf_counter() - start) * 1000
            cpu[which] += time.process_time() - start_cpu
            (result.get_ms if which == "get" else result.raw_ms)[lookup.kind].append(elapsed)
        result.found[lookup.kind] += counts["get"] > 0
        result.mismatches += counts["get"] != counts["raw"]
    calls = sum(len(samples) for samples in result.get_ms.values())
    result.cpu_ms = {which: 1000 * seconds / calls for which, seconds in cpu.items()}
    conn.close()
    store.dispose()
    return result


# -- round trips ----------------------------------------------------------------------------


def count_round_trips(url: str) -> dict[str, float]:
    """Client requests per operation, from a libpq trace of a separate, untimed connection."""
    store = Store(Settings(database_url=url))
    trips = RoundTrips()
    trips.attach_store(store)
    conn = psycopg.connect(libpq_url(url))
    trips_plain = RoundTrips()
    trips_plain.attach(conn.pgconn)
    put_write, plain_write = PutWrite(store), PlainWrite(conn, store.catalog, batched=False)
    figures: dict[str, float] = {}
    for mode, write, counter in (("put", put_write, trips), ("plain", plain_write, trips_plain)):
        figures[f"{mode} new key"] = counter.per_call(
            lambda i, w=write, m=mode: w(f"bench-trips-{m}", f"s{i}", "x", WRITE_BASE)
        )
        figures[f"{mode} supersede"] = counter.per_call(
            lambda i, w=write, m=mode: w(
                f"bench-trips-{m}", "one", f"v{i}", WRITE_BASE + timedelta(days=i + 1)
            )
        )
    query = {"tenant_id": "bench-trips-put", "subject": "one", "attribute": WRITE_ATTRIBUTE}
    figures["get"] = trips.per_call(lambda _i: get(store, query))
    raw = psycopg.connect(libpq_url(url), autocommit=True)
    trips_raw = RoundTrips()
    trips_raw.attach(raw.pgconn)
    params = {"tenant": query["tenant_id"], "subject": "one", "attribute": WRITE_ATTRIBUTE}
    lookup = Lookup("current", query, RAW_CURRENT, params | {"at": None})
    figures["raw SELECT"] = trips_raw.per_call(lambda _i: raw_select(raw, lookup))
    raw.close()
    conn.close()
    store.dispose()
    return figures


# -- main -----------------------------------------------------------------------------------


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


def report_reads(url: str, catalog: Catalog, args: argparse.Namespace) -> dict[str, float]:
    """Load the facts, time the lookups, print the table; return client CPU ms per call."""
    load_start = time.perf_counter()
    keys, loaded = load_facts(url, catalog, args.facts, args.seed)
    warm = make_lookups(keys, args.warmup, args.seed + 7)
    timed = make_lookups(keys, args.lookups, args.seed)
    key_count = len(keys)
    del keys  # hundreds of thousands of objects would slow the garbage collector during timing
    gc.collect()
    print(
        f"loaded {loaded:,} fact rows ({key_count:,} keys) by COPY, then VACUUM ANALYZE and "
        f"CHECKPOINT, in {time.perf_counter() - load_start:.0f} s"
    )
    print(f"\nRead latency at {loaded:,} facts, {args.lookups} random lookups each, in ms")
    print(f"({machine_load()} before)")
    reads = run_reads(url, warm, timed)
    rows = []
    for kind, label in (("current", "get"), ("at", "get at="), ("known_at", "get known_at=")):
        get_ms, raw_ms = reads.get_ms[kind], reads.raw_ms[kind]
        get_p50, get_p99 = percentile(get_ms, 0.5), percentile(get_ms, 0.99)
        raw_p50, raw_p99 = percentile(raw_ms, 0.5), percentile(raw_ms, 0.99)
        rows.append(
            [
                label,
                f"{get_p50:.3f}",
                f"{get_p99:.3f}",
                f"{raw_p50:.3f}",
                f"{raw_p99:.3f}",
                f"{get_p50 / raw_p50:.1f}x",
                f"{get_p99 / raw_p99:.1f}x",
                f"{reads.found[kind] / len(get_ms):.0%}",
                "ok" if get_p99 <= GET_P99_TARGET_MS else "MISSED",
            ]
        )
    headers = ["read", "get p50", "get p99", "raw p50", "raw p99", "p50 get/raw", "p99 get/raw"]
    print_table([*headers, "found", f"p99<={GET_P99_TARGET_MS:g}ms"], rows)
    if reads.mismatches:
        print(f"WARNING: get and the raw SELECT returned different row counts {reads.mismatches}x")
    print(f"({machine_load()} after)")
    return reads.cpu_ms


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


def report_import(url: str, lines: int) -> None:
    """`sgam import` of a JSONL file end to end: a process started on a fresh file."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "import.jsonl"
        with path.open("w") as file:
            for n in range(lines):
                command = {
                    "tenant_id": "bench-import",
                    "subject": f"customer-{n // 4}",
                    "attribute": IMPORT_ATTRIBUTES[n % 4],
                    "value": _import_value(n),
                    "valid_from": "2026-01-01T00:00:00Z",
                    "source_episode_id": "crm-export",
                    "idempotency_key": f"crm-{n}",
                }
                file.write(canonical_json(command) + "\n")
        sgam = str(Path(sys.executable).parent / "sgam")
        env = {**os.environ, "SGAM_DATABASE_URL": url}
        print(f"\nsgam import of a {lines:,}-line JSONL file, end to end ({machine_load()} before)")
        for run in ("first run", "re-run (every key repeated)"):
            started = time.perf_counter()
            done = subprocess.run([sgam, "import", str(path)], env=env, capture_output=True)
            elapsed = time.perf_counter() - started
            if done.returncode != 0:
                sys.exit(f"sgam import failed ({done.returncode}): {done.stderr.decode()[:500]}")
            print(f"{run:<28} {elapsed:6.1f} s  {lines / elapsed:8,.0f} lines/s")
        print(f"({machine_load()} after)")


IMPORT_ATTRIBUTES = ("home_city", "employer", "account_plan", "newsletter_opt_in")


def _import_value(n: int) -> Any:
    attribute = IMPORT_ATTRIBUTES[n % 4]
    if attribute == "account_plan":
        return ("free", "pro", "enterprise")[n % 3]
    if attribute == "newsletter_opt_in":
        return n % 2 == 0
    return f"{attribute}-{n}"


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
    started = time.perf_counter()
    print(f"SGAM ledger benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {make_url(args.url)}")
    recreate_database(args.url)
    for line in describe_environment(args.url):
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
    print("\nClient round trips per operation (libpq trace, after warm-up)")
    trips = count_round_trips(args.url)
    print_table(["operation", "round trips"], [[name, f"{n:.1f}"] for name, n in trips.items()])
    if not args.keep:
        drop(args.url)
    print(f"\ntotal runtime {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
