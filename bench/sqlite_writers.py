"""Threads of one process writing one SQLite file at once, against the same puts one after
another: what the writers' turn (`backends.Sqlite.writers`) buys, measured beside the file's
lock alone (the turn switched off for the run: SQLite's busy handler, which sleeps up to
100 ms a turn).

    .venv/bin/python bench/sqlite_writers.py [--threads 8 24] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import pipeline
from pipeline.db.store import Store, open_store
from pipeline.settings import Settings


def _put(store: Store, subject: str) -> None:
    pipeline.put(
        store,
        {
            "tenant_id": "acme",
            "subject": subject,
            "attribute": "home_city",
            "value": "Utrecht",
            "valid_from": "2026-06-01T00:00:00Z",
            "source_episode_id": "e1",
        },
    )


def _at_once(store: Store, threads: int, tag: str) -> float:
    writers = [threading.Thread(target=_put, args=(store, f"{tag}-{n}")) for n in range(threads)]
    started = time.perf_counter()
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    return time.perf_counter() - started


def _one_after_another(store: Store, count: int, tag: str) -> float:
    started = time.perf_counter()
    for n in range(count):
        _put(store, f"{tag}-{n}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[8, 24])
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sgam-sqlite-writers-") as folder:
        store = open_store(Settings(database_url=f"sqlite:///{Path(folder) / 'w.sqlite3'}"))
        turns = store._writers  # noqa: SLF001 - switched off and on for the comparison
        _put(store, "warm-up")
        for threads in options.threads:
            figures: dict[str, list[float]] = {"serial": [], "turns": [], "file lock": []}
            for round_ in range(options.rounds):  # the three alternating, round by round
                tag = f"{threads}-{round_}"
                figures["serial"].append(_one_after_another(store, threads, f"serial-{tag}"))
                store._writers = turns  # noqa: SLF001
                figures["turns"].append(_at_once(store, threads, f"turns-{tag}"))
                store._writers = None  # noqa: SLF001
                figures["file lock"].append(_at_once(store, threads, f"file-{tag}"))
                store._writers = turns  # noqa: SLF001
            median = {name: statistics.median(laps) * 1000 for name, laps in figures.items()}
            print(
                f"{threads} puts: one after another {median['serial']:.1f} ms; at once, "
                f"with the turn {median['turns']:.1f} ms "
                f"({median['serial'] / median['turns']:.2f}x the serial rate), "
                f"the file's lock alone {median['file lock']:.1f} ms "
                f"({median['serial'] / median['file lock']:.2f}x)"
            )
        store.dispose()


if __name__ == "__main__":
    main()
