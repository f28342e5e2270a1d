"""A long-lived writer on a new database must not slow down as the ledger grows.

    .venv/bin/python bench/fresh_database.py [--facts 100000] [--contrast 15000]

Drops and recreates the database named by --url (its name must contain `bench`), migrates it,
runs ANALYZE on the empty tables (what an operator, `sgam replay` or autovacuum's first pass
leaves behind; autovacuum itself may be off), then writes --facts facts through
`pipeline.put_many(store, commands, chunk=500)` in one process on one Store. It prints the rate
of each --block of facts, the CPU time per fact of the client and of its PostgreSQL backend
(which other work on the machine inflates much less than it slows the rate), and how many
ledger rows sequential scans read meanwhile. PASS when the last block's rate is at least 80 %
of the first block's after a warm-up block. Then, for contrast, the same on a new database with
the re-planning check removed (`pipeline.db.replan`), for --contrast facts in smaller blocks
(without it the writer slows down too fast for more).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import psycopg
from environment import describe, machine_load, use_support_catalog
from scratch_databases import drop, libpq_url, recreate
from sqlalchemy import event

import pipeline
from pipeline.db import replan
from pipeline.db.store import Store
from pipeline.settings import Settings

LEDGER = ("claims", "facts", "events", "idempotency_keys")
TENANTS = 50


def commands(start: int, count: int) -> Iterator[dict[str, Any]]:
    """New keys, with every 10th command superseding the key written 5 commands before (a
    later valid_from) and every other command carrying an idempotency key."""
    for number in range(start, start + count):
        renews = number % 10 == 9
        subject = number - 5 if renews else number
        command: dict[str, Any] = {
            "tenant_id": f"bench-{subject % TENANTS}",
            "subject": f"person-{subject}",
            "attribute": "home_city",
            "value": f"City {number}",
            "valid_from": "2026-06-01T00:00:00Z" if renews else "2026-01-01T00:00:00Z",
            "source_episode_id": f"episode-{number}",
        }
        if number % 2:
            command["idempotency_key"] = f"put-{number}"
        yield command


def recreate_libpq(url: str) -> str:
    """Drop and create the database of `url`; its libpq form for the monitoring connection."""
    recreate(url)
    return libpq_url(url)


def seq_rows_read(monitor: psycopg.Connection[Any]) -> int:
    """Rows read by sequential scans of the ledger tables so far."""
    row = monitor.execute(
        "SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables WHERE relname = ANY(%s)",
        [list(LEDGER)],
    ).fetchone()
    return int(row[0]) if row else 0


def server_seconds(pids: set[int]) -> float:
    """CPU time used so far by the writer's PostgreSQL backends (0 when they are not on this
    machine): unlike the rate, it does not move with what else shares the cores."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def run(
    url: str, facts: int, block: int, chunk: int, *, fix: bool, analyze: bool
) -> tuple[list[float], list[float]]:
    """Write `facts` facts on a new database in blocks; the rate and the CPU seconds per fact
    (client and server) of each block."""
    libpq = recreate_libpq(url)
    store = Store(Settings(database_url=url))
    if not fix:
        event.remove(store.engine, "checkout", replan.on_checkout)
    backends: set[int] = set()
    event.listen(
        store.engine, "connect", lambda dbapi, _record: backends.add(dbapi.info.backend_pid)
    )
    store.upgrade()
    if analyze:
        store.analyze()
    rates: list[float] = []
    costs: list[float] = []
    with psycopg.connect(libpq, autocommit=True) as monitor:
        scanned = seq_rows_read(monitor)
        for start in range(0, facts, block):
            server = server_seconds(backends)
            client = time.process_time()
            started = time.perf_counter()
            outcomes = pipeline.put_many(store, commands(start, block), chunk=chunk)
            elapsed = time.perf_counter() - started
            client = time.process_time() - client
            server = server_seconds(backends) - server
            failed = [o for o in outcomes if not isinstance(o, pipeline.PutResult)]
            if failed:
                sys.exit(f"{len(failed)} commands failed, the first: {failed[0]!r}")
            rates.append(block / elapsed)
            costs.append((client + server) / block)
            time.sleep(1.2)  # untimed: the writer's statistics reach the view within a second
            now = seq_rows_read(monitor)
            print(
                f"  facts {start + 1:>7,}-{start + block:<7,} {rates[-1]:6.0f} facts/s"
                f"   CPU ms/fact: client {1000 * client / block:.2f}, server"
                f" {1000 * server / block:.2f}   seq-scanned rows {now - scanned:>12,}",
                flush=True,
            )
            scanned = now
    store.dispose()
    return rates, costs


def put_cost(url: str, puts: int, first: int) -> None:
    """Single puts on the grown database, alternating (ABC CBA) a store with the check, one
    without it, and one planning every execution (`plan_cache_mode=force_custom_plan`, the
    other way to keep plans from going stale): what the check costs on the steady put path."""
    modes = ("with the check", "without it", "force_custom_plan")
    stores: dict[str, tuple[Store, set[int]]] = {}
    for mode in modes:
        store = Store(Settings(database_url=url))
        backends: set[int] = set()

        def connected(
            dbapi: Any, _record: object, backends: set[int] = backends, mode: str = mode
        ) -> None:
            backends.add(dbapi.info.backend_pid)
            if mode == "force_custom_plan":
                dbapi.execute("SET plan_cache_mode = force_custom_plan")

        event.listen(store.engine, "connect", connected)
        if mode != "with the check":
            event.remove(store.engine, "checkout", replan.on_checkout)
        stores[mode] = (store, backends)
    totals = {mode: [0.0, 0.0, 0.0] for mode in modes}
    number = first
    for index, mode in enumerate([*modes, *reversed(modes)]):
        store, backends = stores[mode]
        batch = list(commands(number, puts // 2 + (50 if index < len(modes) else 0)))
        number += len(batch)
        if index < len(modes):  # untimed warm-up: connection, prepared statements, caches
            for command in batch[:50]:
                pipeline.put(store, command)
            batch = batch[50:]
        server, client = server_seconds(backends), time.process_time()
        started = time.perf_counter()
        for command in batch:
            pipeline.put(store, command)
        totals[mode][0] += time.perf_counter() - started
        totals[mode][1] += time.process_time() - client
        totals[mode][2] += server_seconds(backends) - server
    for mode, (wall, client, server) in totals.items():
        each = puts // 2 * 2
        print(
            f"  {mode:<18} {each / wall:6.0f} puts/s   ms/put: wall {1000 * wall / each:.2f},"
            f" client CPU {1000 * client / each:.2f}, server CPU {1000 * server / each:.3f}"
        )
    for store, _ in stores.values():
        store.dispose()


def verdict(rates: list[float]) -> tuple[float, bool]:
    """The last block's rate over the first after the warm-up block; PASS at 0.8 or more."""
    ratio = rates[-1] / rates[1]
    return ratio, ratio >= 0.8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_fresh"
    )
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--block", type=int, default=10_000)
    parser.add_argument("--chunk", type=int, default=500, help="commands per put_many transaction")
    parser.add_argument(
        "--contrast", type=int, default=15_000, help="facts without the fix (0: skip)"
    )
    parser.add_argument(
        "--puts", type=int, default=2_000, help="single puts per mode for the cost (0: skip)"
    )
    parser.add_argument("--no-analyze", action="store_true", help="leave the new tables unanalysed")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()
    use_support_catalog()
    if args.facts < 3 * args.block:
        sys.exit("--facts must be at least 3 blocks: a warm-up, a first and a last")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"SGAM fresh-database benchmark, {stamp}, {args.url}")
    recreate_libpq(args.url)  # the settings are read from the server that will be measured
    for line in describe(args.url):
        print(line)
    analyze = not args.no_analyze
    print(f"ANALYZE after migrating: {'yes' if analyze else 'no'}; chunk {args.chunk}")
    print(f"\nwith the re-planning check ({machine_load()} before)")
    rates, costs = run(args.url, args.facts, args.block, args.chunk, fix=True, analyze=analyze)
    ratio, passed = verdict(rates)
    print(f"  ({machine_load()} after)")
    print(
        f"  first block after warm-up {rates[1]:.0f} facts/s, last {rates[-1]:.0f} facts/s: "
        f"last/first {ratio:.2f} -> {'PASS' if passed else 'FAIL'} (>= 0.80)"
    )
    print(f"  CPU per fact (client + server), last/first: {costs[-1] / costs[1]:.2f}")
    if args.puts:
        print(f"\nsingle puts on the grown database, {args.puts:,} per mode")
        print(f"  ({machine_load()} before)")
        put_cost(args.url, args.puts, args.facts)
        print(f"  ({machine_load()} after)")
    if args.contrast:
        small = max(args.block // 4, 1)
        print(f"\nwithout it, {args.contrast:,} facts ({machine_load()} before)")
        rates, costs = run(args.url, args.contrast, small, args.chunk, fix=False, analyze=analyze)
        print(f"  ({machine_load()} after)")
        print(f"  rate last/first after warm-up {rates[-1] / rates[1]:.2f}")
        print(f"  CPU per fact (client + server), last/first: {costs[-1] / costs[1]:.2f}")
    if not args.keep:
        drop(args.url)
    if not passed:
        sys.exit(1)


if __name__ == "__main__":
    main()
