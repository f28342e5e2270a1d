"""The read benchmark: `pipeline.get` (current, `at=`, `known_at=`) against a hand-written
SELECT of the same rows, on the same random lookups over a bulk-loaded ledger."""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from environment import machine_load
from figures import percentile, print_table, rfc3339
from ledger_load import LoadedKey, load_facts
from plain_sql import RAW_CURRENT, RAW_KNOWN, raw_select
from scratch_databases import libpq_url

from pipeline import Settings, Store, get
from schemas.catalog import Catalog

GET_P99_TARGET_MS = 2.0


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
        raw_select(conn, lookup.sql, lookup.params)
    for index, lookup in enumerate(timed):
        order = ("get", "raw") if index % 2 == 0 else ("raw", "get")
        counts = {}
        for which in order:
            start, start_cpu = time.perf_counter(), time.process_time()
            counts[which] = len(
                get(store, lookup.query)
                if which == "get"
                else raw_select(conn, lookup.sql, lookup.params)
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
