"""Where a write's and a read's client CPU goes: cProfile over `put` (new keys), `put_many`
(chunks of new keys) and `get`, each charged by its innermost frame to a part (SQLAlchemy
ORM, SQLAlchemy Core, psycopg, pydantic, SGAM's ledger, ...), and the client CPU per call.
A part's share is of the profiled calls' own CPU time (the profiler's timer is process time:
waiting on the server is not counted).

    .venv/bin/python bench/write_profile.py [--url URL] [--puts 500] [--chunks 5] [--top 12]

The database named by --url (or SGAM_BENCH_URL) is dropped and recreated.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time
from collections import Counter
from collections.abc import Callable, Sequence

from environment import describe, machine_load, use_support_catalog
from figures import print_table
from plain_sql import WRITE_ATTRIBUTE
from scratch_databases import drop, recreate
from write_runs import WRITE_BASE, PutManyWrite, PutWrite

from pipeline import Settings, Store, get

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_profile"
# The innermost frame's file, first match wins: a path fragment and the part it is charged to.
PARTS = (
    ("sqlalchemy/orm", "SQLAlchemy ORM"),
    ("sqlalchemy", "SQLAlchemy Core"),
    ("psycopg", "psycopg"),
    ("pydantic", "pydantic"),
    ("pipeline/ledger", "SGAM ledger"),
    ("pipeline/db", "SGAM db"),
    ("pipeline/embedding", "SGAM embedding"),
    ("pipeline/", "SGAM other"),
    ("schemas/", "SGAM schemas"),
    ("tenacity", "tenacity"),
    ("json", "json"),
    ("uuid", "uuid"),
    ("hashlib", "hashlib"),
)


def part_of(filename: str) -> str:
    for fragment, part in PARTS:
        if fragment in filename:
            return part
    if filename.startswith("~") or filename == "<built-in>":
        return "builtins (C)"
    return "other Python"


def profiled(call: Callable[[int], object], times: int) -> tuple[pstats.Stats, float]:
    """The profile of `times` calls, and the client CPU per call without the profiler."""
    for i in range(times):  # warm: connect, prepare, fill caches
        call(-1 - i)
    started = time.process_time()
    for i in range(times):
        call(i)
    cpu = (time.process_time() - started) / times
    profile = cProfile.Profile(time.process_time)  # CPU, not waiting on the server
    profile.enable()
    for i in range(times, 2 * times):
        call(i)
    profile.disable()
    return pstats.Stats(profile), cpu


def shares(stats: pstats.Stats) -> Counter[str]:
    by_part: Counter[str] = Counter()
    for (filename, _line, _name), row in stats.stats.items():  # type: ignore[attr-defined]
        own = row[2]
        by_part["builtins (C)" if filename == "~" else part_of(filename)] += own
    return by_part


def _short(filename: str) -> str:
    return "/".join(filename.split("/")[-2:])


def other_files(stats: pstats.Stats, count: int) -> list[list[str]]:
    """The files of the part not named in PARTS, by self time."""
    by_file: Counter[str] = Counter()
    total = 0.0
    for (filename, _line, _name), row in stats.stats.items():  # type: ignore[attr-defined]
        total += row[2]
        if part_of(filename) == "other Python":
            by_file[_short(filename)] += row[2]
    return [[name, f"{own / (total or 1.0):.1%}"] for name, own in by_file.most_common(count)]


def top_functions(stats: pstats.Stats, count: int) -> list[list[str]]:
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])  # type: ignore[attr-defined]
    total = sum(row[2] for _key, row in rows) or 1.0
    return [
        [f"{name} ({_short(filename)}:{line})", f"{row[2] / total:.1%}", str(row[1])]
        for (filename, line, name), row in rows[:count]
    ]


def report(label: str, call: Callable[[int], object], times: int, per: int, top: int) -> None:
    stats, cpu = profiled(call, times)
    by_part = shares(stats)
    total = sum(by_part.values()) or 1.0
    print(f"\n{label}: client CPU {cpu / per * 1e3:.3f} ms per op (unprofiled, {times} calls)")
    print_table(
        ["part (innermost frame)", "share"],
        [[part, f"{own / total:.1%}"] for part, own in by_part.most_common()],
    )
    print_table(["other Python, by file", "share"], other_files(stats, 8))
    print_table(["function (self time)", "share", "calls"], top_functions(stats, top))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("SGAM_BENCH_URL", DEFAULT_URL))
    parser.add_argument("--puts", type=int, default=500)
    parser.add_argument("--chunks", type=int, default=5, help="put_many calls of 1,000")
    parser.add_argument("--top", type=int, default=12)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    use_support_catalog()
    recreate(args.url)
    store = Store(Settings(database_url=args.url))
    store.upgrade()
    for line in describe(args.url):
        print(line)
    print(f"load before: {machine_load()}")
    put_write, many = PutWrite(store), PutManyWrite(store)

    def one_put(i: int) -> None:
        put_write("bench-profile-put", f"s{i}", "x", WRITE_BASE)

    def one_chunk(i: int) -> None:
        for j in range(1000):
            many("bench-profile-many", f"c{i}-{j}", "x", WRITE_BASE)
        many.flush()

    query = {"tenant_id": "bench-profile-put", "subject": "s1", "attribute": WRITE_ATTRIBUTE}
    report("put, new key", one_put, args.puts, 1, args.top)
    report("put_many, 1,000 new keys", one_chunk, args.chunks, 1000, args.top)
    report("get, now", lambda _i: get(store, query), args.puts, 1, args.top)
    print(f"load after: {machine_load()}")
    store.dispose()
    drop(args.url)


if __name__ == "__main__":
    main()
