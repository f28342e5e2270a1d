"""Client round trips and statements per operation: put and the plain INSERT (new key,
supersede, with an idempotency key), a put_many chunk of 1,000 new keys and executemany of the
same rows, get and the raw SELECT, a `remember` (rules), a search of facts and episodes and
an episode of the rules lane (an inline intake of a worker task's batch, per episode; with
nothing extracted, and with one candidate each),
counted from a libpq trace of separate, untimed connections.

    .venv/bin/python bench/round_trips.py [--url URL]     # alone; bench/ledger.py runs it too

A round trip is a request the client waits on (a simple Query, or an extended-protocol Sync);
a statement is one the server runs (a simple Query, or an Execute). GET facts over HTTP is
not counted here: its hot read runs `get` (`pipeline/api/hot_reads.py`), plus one Redis call
for the rate limit."""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import psycopg
from environment import use_support_catalog
from figures import print_table
from plain_sql import EPISODE, RAW_CURRENT, WRITE_ATTRIBUTE, PlainWrite, raw_select
from psycopg import pq
from scratch_databases import drop, libpq_url, recreate
from sqlalchemy import event
from write_runs import WRITE_BASE, PutManyWrite, PutWrite, Write

import pipeline
from pipeline import Settings, Store, get, put

CHUNK = 1000  # facts per put_many / executemany call counted
LANE_BATCH = 128  # episodes per inline intake counted: a rules-lane worker task's batch
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_round_trips"
REMEMBERED = "Remember that my home city is Lisbon."  # one fact of the support catalogue


class RoundTrips:
    """Counts client requests (simple Query and extended-protocol Sync messages) with PQtrace."""

    _REQUEST = re.compile(r"^F\t\d+\t(Query|Sync)\b", re.MULTILINE)
    _STATEMENT = re.compile(r"^F\t\d+\t(Query|Execute)\b", re.MULTILINE)

    def __init__(self) -> None:
        self.file = tempfile.NamedTemporaryFile("w+", suffix=".pqtrace")  # noqa: SIM115

    def attach(self, pgconn: pq.abc.PGconn) -> None:
        pgconn.trace(self.file.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

    def attach_store(self, store: Store) -> None:
        event.listen(store.engine, "connect", lambda dbapi, _record: self.attach(dbapi.pgconn))

    def count(self) -> tuple[int, int]:
        """Requests and statements traced so far."""
        self.file.flush()
        text = Path(self.file.name).read_text(errors="replace")
        return len(self._REQUEST.findall(text)), len(self._STATEMENT.findall(text))

    def per_call(self, call: Callable[[int], object], times: int = 20) -> tuple[float, float]:
        """Mean requests and statements per call of `call`, after as many untimed calls to
        warm up."""
        for i in range(times):  # warm: connect, prepare statements
            call(i)
        requests, statements = self.count()
        for i in range(times, 2 * times):
            call(i)
        after = self.count()
        return (after[0] - requests) / times, (after[1] - statements) / times


def _chunk(write: Write, tenant: str, i: int) -> None:
    for j in range(CHUNK):
        write(tenant, f"c{i}-{j}", "x", WRITE_BASE)
    write.flush()


def count_round_trips(url: str) -> dict[str, tuple[float, float]]:
    """Client requests and statements per operation, from a libpq trace of a separate,
    untimed connection."""
    store = Store(Settings(database_url=url))
    trips = RoundTrips()
    trips.attach_store(store)
    conn = psycopg.connect(libpq_url(url))
    trips_plain = RoundTrips()
    trips_plain.attach(conn.pgconn)
    put_write, plain_write = PutWrite(store), PlainWrite(conn, store.catalog, batched=False)
    figures: dict[str, tuple[float, float]] = {}
    for mode, write, counter in (("put", put_write, trips), ("plain", plain_write, trips_plain)):
        figures[f"{mode} new key"] = counter.per_call(
            lambda i, w=write, m=mode: w(f"bench-trips-{m}", f"s{i}", "x", WRITE_BASE)
        )
        figures[f"{mode} supersede"] = counter.per_call(
            lambda i, w=write, m=mode: w(
                f"bench-trips-{m}", "one", f"v{i}", WRITE_BASE + timedelta(days=i + 1)
            )
        )
    figures["put new key, idempotency key"] = trips.per_call(
        lambda i: put(
            store,
            {
                "tenant_id": "bench-trips-keyed",
                "subject": f"s{i}",
                "attribute": WRITE_ATTRIBUTE,
                "value": "x",
                "valid_from": WRITE_BASE.isoformat(),
                "source_episode_id": EPISODE,
                "idempotency_key": f"key-{i}",
            },
        )
    )
    many, plain_many = PutManyWrite(store), PlainWrite(conn, store.catalog, batched=True)
    figures[f"put_many {CHUNK:,} new keys"] = trips.per_call(
        lambda i: _chunk(many, "bench-trips-many", i), times=3
    )
    figures[f"executemany {CHUNK:,} new keys"] = trips_plain.per_call(
        lambda i: _chunk(plain_many, "bench-trips-plain-many", i), times=3
    )
    query = {"tenant_id": "bench-trips-put", "subject": "one", "attribute": WRITE_ATTRIBUTE}
    figures["get"] = trips.per_call(lambda _i: get(store, query))
    raw = psycopg.connect(libpq_url(url), autocommit=True)
    trips_raw = RoundTrips()
    trips_raw.attach(raw.pgconn)
    params = {"tenant": query["tenant_id"], "subject": "one", "attribute": WRITE_ATTRIBUTE}
    figures["raw SELECT"] = trips_raw.per_call(
        lambda _i: raw_select(raw, RAW_CURRENT, params | {"at": None})
    )
    raw.close()
    conn.close()
    figures |= _reads_and_episodes(store, trips)
    store.dispose()
    return figures


def _reads_and_episodes(store: Store, trips: RoundTrips) -> dict[str, tuple[float, float]]:
    """remember, search and the rules lane's episodes, on the same traced store."""
    figures: dict[str, tuple[float, float]] = {}
    at = WRITE_BASE.isoformat()
    figures["remember (rules, one fact)"] = trips.per_call(
        lambda i: pipeline.remember(
            store,
            {
                "tenant_id": "bench-trips-remember",
                "subject": f"s{i}",
                "text": REMEMBERED,
                "at": at,
            },
        )
    )
    search = {"tenant_id": "bench-trips-remember", "subject": "s1", "query": "home city Lisbon"}
    figures["search (facts and episodes)"] = trips.per_call(
        lambda _i: pipeline.search(store, search)
    )

    lanes = (("nothing extracted", "Turn {n} of the chat."), ("one candidate each", REMEMBERED))
    for number, (what, text) in enumerate(lanes):

        def intake(i: int, text: str = text, tenant: str = f"bench-trips-lane-{number}") -> None:
            episodes = [
                {
                    "tenant_id": tenant,
                    "subject": f"s{i}-{n % 8}",
                    "session_id": f"session-{i}",
                    "episode_id": f"e{i}-{n}",
                    "occurred_at": at,
                    "text": text.format(n=n),
                }
                for n in range(LANE_BATCH)
            ]
            report = pipeline.ingest(store, episodes)
            assert {receipt.status for receipt in report.receipts} == {"done"}, report

        requests, statements = trips.per_call(intake, times=3)
        figures[f"rules-lane episode, {what} (per episode)"] = (
            requests / LANE_BATCH,
            statements / LANE_BATCH,
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("SGAM_BENCH_URL", DEFAULT_URL))
    options = parser.parse_args()
    use_support_catalog()
    recreate(options.url)
    Store(Settings(database_url=options.url)).upgrade()
    try:
        trips = count_round_trips(options.url)
    finally:
        drop(options.url)
    print_table(
        ["operation", "round trips", "statements"],
        [[name, f"{n:.1f}", f"{k:.1f}"] for name, (n, k) in trips.items()],
    )


if __name__ == "__main__":
    main()
