"""The forget race soak: thousands of rounds of forget and purge racing confirm, reject,
promote, dismiss, put and remember on one subject each, through a real `sgam serve`, each round
checked by the race test's invariant checker (tests/integration/forget_race_helpers.py).

    .venv/bin/python bench/forget_race_soak.py [--store postgres|sqlite] [--rounds 2000]
                                               [--parallel 3] [--seed N] [--url URL]
                                               [--seconds S]

PostgreSQL is where the races are real (SQLite serialises every writer); --url names its
server and a database `sgam_<user>_race_soak` is created there, emptied first. The server runs
on the Redis database SGAM_TEST_API_REDIS_URL names (rate limits off). Reported: rounds,
violations (the target is none), the answers by operation and status, rounds per second and
the machine's load (it is shared: say so beside any figure).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from environment import machine_load  # noqa: E402
from sqlalchemy import make_url  # noqa: E402

from pipeline.access.keys import create_key  # noqa: E402
from pipeline.db.store import Store, open_store  # noqa: E402
from pipeline.settings import Settings  # noqa: E402
from tests.databases import create_database, empty_database  # noqa: E402
from tests.integration.forget_race_helpers import Keys, Tally, run_rounds  # noqa: E402
from tests.integration.server_helpers import start_server, stop_server  # noqa: E402


def database(store: str, url: str, workdir: Path) -> str:
    if store == "sqlite":
        return f"sqlite:///{workdir / 'soak.sqlite3'}"
    own = make_url(url).set(database="sgam_hard_race_soak").render_as_string(hide_password=False)
    create_database(own)
    return own


def _progress(tally: Tally, started: float) -> None:
    if tally.rounds % 10 == 0:
        seconds = time.perf_counter() - started
        print(
            f"{tally.rounds} rounds, {len(tally.violations)} violations, {seconds:.0f} s",
            file=sys.stderr,
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--parallel", type=int, default=3)
    parser.add_argument("--seconds", type=float, help="start no round after this many seconds")
    parser.add_argument("--seed", type=int, default=random.randrange(10**6))
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "SGAM_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/x"
        ),
    )
    given = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="race-soak-"))
    url = database(given.store, given.url, workdir)
    migrating = Store(Settings(database_url=url))
    migrating.upgrade()
    migrating.dispose()
    if given.store == "postgres":
        empty_database(url)  # a soak starts from nothing
    store = open_store(Settings(database_url=url))
    made = [
        create_key(store, {"tenant_id": "soak", "role": role})[1] for role in Keys.__annotations__
    ]
    store.dispose()
    server = start_server(
        url, workdir, ready_within_s=600, SGAM_API_RATE_PER_S="0", SGAM_CATALOG="support"
    )
    load_before = machine_load()
    started = time.perf_counter()
    try:
        tally = run_rounds(
            server,
            Keys(*made),
            given.rounds,
            seed=given.seed,
            parallel=given.parallel,
            progress=lambda tally: _progress(tally, started),
            until=None if given.seconds is None else time.monotonic() + given.seconds,
        )
    finally:
        stop_server(server)
    seconds = time.perf_counter() - started
    statuses: dict[str, dict[str, int]] = {}
    for (name, code), count in sorted(tally.statuses.items()):
        statuses.setdefault(name, {})[str(code)] = count
    print(
        json.dumps(
            {
                "store": given.store,
                "seed": given.seed,
                "rounds": tally.rounds,
                "rounds_with_a_forget": tally.forgotten_rounds,
                "violations": len(tally.violations),
                "first_violations": tally.violations[:10],
                "answers": statuses,
                "seconds": round(seconds, 1),
                "rounds_per_s": round(tally.rounds / seconds, 2),
                "load_before": load_before,
                "load_after": machine_load(),
            },
            indent=2,
        )
    )
    sys.exit(1 if tally.violations else 0)


if __name__ == "__main__":
    main()
